import type { Socket } from "node:net";
import type { Redis } from "ioredis";
import { errorMessage, SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";
import { closeClient } from "./close.js";

/**
 * Redis connections owned by the composition root: created here, closed by `close()`. Drivers
 * handed a client never quit it.
 */
export class RedisConnections {
  readonly #clients: Redis[] = [];
  readonly #shared = new Map<string, Redis>();
  /** ioredis, loaded on first use: a gateway without Redis never pays for it. */
  #RedisCtor: typeof import("ioredis")["Redis"] | null = null;

  constructor(private readonly logger: Logger) {}

  /**
   * One shared command client per URL. It fails fast while Redis is away (no offline queue), so
   * RPC answers UNAVAILABLE instead of hanging; ioredis reconnects by itself.
   */
  async shared(url: string, field: string): Promise<Redis> {
    const existing = this.#shared.get(url);
    if (existing) return existing;
    this.#RedisCtor ??= (await import("ioredis")).Redis;
    const client = new this.#RedisCtor(url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 3000,
    });
    this.#track(client, url);
    try {
      await client.connect();
      await client.ping();
    } catch (err) {
      client.disconnect();
      throw new SwitchboardError(
        "UNAVAILABLE",
        `${field}: cannot reach Redis at ${redactUrl(url)} (${errorMessage(err)}); start Redis or fix the URL`,
      );
    }
    const policy = ((await client.config("GET", "maxmemory-policy").catch(() => [])) as string[])[1];
    if (policy && policy !== "noeviction") {
      this.logger.warn(
        { url: redactUrl(url), policy },
        "Redis maxmemory-policy is not noeviction: queued turns and sessions may be evicted; set maxmemory-policy noeviction",
      );
    }
    this.#shared.set(url, client);
    return client;
  }

  /** A new blocking client (BullMQ workers, subscribers): `maxRetriesPerRequest: null`, retries forever. */
  blocking(url: string): Redis {
    if (!this.#RedisCtor)
      throw new Error("RedisConnections.blocking() before shared(): no shared client yet");
    const client = new this.#RedisCtor(url, { maxRetriesPerRequest: null });
    this.#track(client, url);
    return client;
  }

  /**
   * "ready" when every shared client answers PING within a second, "unavailable" otherwise,
   * "n/a" without Redis. Asked live: a connection that just dropped may still look ready.
   */
  async status(): Promise<string> {
    const all = [...this.#shared.values()];
    if (all.length === 0) return "n/a";
    const pings = all.map((c) =>
      Promise.race([
        c.ping().then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((r) => setTimeout(() => r(false), 1000).unref()),
      ]),
    );
    return (await Promise.all(pings)).every(Boolean) ? "ready" : "unavailable";
  }

  #track(client: Redis, url: string): void {
    this.#clients.push(client);
    client.on("connect", () => coalesceWrites((client as unknown as { stream: Socket }).stream));
    let down = false;
    client.on("error", (err: Error) => {
      if (!down)
        this.logger.warn({ url: redactUrl(url), err: err.message }, "Redis connection error; retrying");
      down = true;
    });
    client.on("ready", () => {
      if (down) this.logger.info({ url: redactUrl(url) }, "Redis connection restored");
      down = false;
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.#clients.map((c) => closeClient(c)));
    this.#clients.length = 0;
    this.#shared.clear();
  }
}

const COALESCING = Symbol("switchboard.coalescing");

/**
 * Commands written to `socket` in one tick leave in one write (cork now, uncork on the next tick).
 * ioredis writes every command on its own; under load, many turns' commands are issued in the same
 * tick and each write to loopback TCP costs a syscall plus the receive path in the kernel.
 */
export function coalesceWrites(socket: Socket): void {
  const s = socket as Socket & { [COALESCING]?: true };
  if (s[COALESCING]) return;
  s[COALESCING] = true;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    socket.uncork();
  };
  const write = socket.write;
  socket.write = function (this: Socket, ...args: Parameters<Socket["write"]>) {
    if (!corked) {
      corked = true;
      socket.cork();
      process.nextTick(uncork);
    }
    return write.apply(this, args);
  } as Socket["write"];
}

/** Hides credentials in a Redis URL for logs and errors. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, "//***@");
}
