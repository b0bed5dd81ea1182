import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { z } from "zod";
import { errorMessage } from "../errors.js";
import type { EventBus, GatewayEventName } from "../events.js";
import type { Logger } from "../log.js";
import type { LiveAudience } from "../pipeline/bullmq/context.js";
import { closeClient } from "../redis/close.js";

/**
 * On the bullmq pipeline a turn runs in whichever process took its job, so its streamed text,
 * typing and transcript events happen on that process's bus. This relay carries them over Redis
 * pub/sub to every gateway, which re-emits them on its own bus (and so on `/ws`). Run lifecycle
 * events travel with the pipeline (`run.started`/`run.finished`); these are the live rest.
 *
 * Best effort, like the events themselves: a message lost while Redis is away is not replayed
 * (clients read transcripts and runs for the truth). Events are batched per tick, so a turn costs
 * one or two PUBLISH commands, not one per event; a process never re-publishes what it received.
 *
 * Only /ws clients consume these events, so they travel only while someone can watch: a gateway
 * with /ws clients is a member of the audience zset (score: expiry, refreshed while it has any),
 * the worker taking a turn counts the other members in the same script (takeTurn-4), and a turn
 * with no audience is `quiet`: its events are not published. The member is added in the same tick
 * the socket connects, on the connection that later submits the socket's turns, so a turn sent
 * after the socket opened always counts it. A gateway without /ws clients re-emits nothing.
 */

/** How long a gateway's membership lasts without a refresh (its process may have died). */
export const AUDIENCE_TTL_MS = 60_000;
const AUDIENCE_REFRESH_MS = 10_000;

export const RELAYED_EVENTS = [
  "run.delta",
  "run.typing",
  "run.fallback",
  "message.appended",
  "session.updated",
  "approval.requested",
  "approval.resolved",
] as const;
type Relayed = (typeof RELAYED_EVENTS)[number];
const relayed: ReadonlySet<string> = new Set(RELAYED_EVENTS);

const relayMessageSchema = z.object({
  from: z.string().min(1),
  events: z
    .array(z.object({ event: z.enum(RELAYED_EVENTS), data: z.record(z.string(), z.unknown()) }))
    .min(1)
    .max(10_000),
});

export interface LiveRelayOptions {
  /** Command connection (shared, owned by the composition root). */
  publisher: Redis;
  /** A new connection for SUBSCRIBE (closed here). */
  createSubscriber: () => Redis;
  /** The pub/sub channel, inside the queue's hash tag. */
  channel: string;
  /** The audience zset (gateways with /ws clients), inside the same hash tag. */
  audienceKey: string;
  logger: Logger;
}

export class LiveRelay implements LiveAudience {
  readonly #from = randomUUID();
  /** Sessions whose turn nobody can watch: their events are not published (counted: nested turns). */
  readonly #quiet = new Map<string, number>();
  #listening = false;
  #refresh: NodeJS.Timeout | null = null;
  /** How this process's own messages begin (#flush writes `from` first): dropped unparsed. */
  readonly #ownPrefix = `{"from":${JSON.stringify(this.#from)},`;
  #pending: Array<{ event: Relayed; data: unknown }> = [];
  #flushing = false;
  #replaying = false;
  #unsubscribe: (() => void) | null = null;
  #sub: Redis | null = null;

  constructor(private readonly opts: LiveRelayOptions) {}

  get member(): string {
    return this.#from;
  }

  quiet(sessionKey: string): () => void {
    return hold(this.#quiet, sessionKey);
  }

  /**
   * This gateway has /ws clients (true) or no longer has any (false). Joining is issued at once
   * (before the caller's next command on the shared connection); the membership is refreshed
   * while listening and removed when the last client leaves.
   */
  listening(on: boolean): void {
    if (on === this.#listening) return;
    this.#listening = on;
    if (on) {
      this.#join();
      this.#refresh = setInterval(() => this.#join(), AUDIENCE_REFRESH_MS);
      this.#refresh.unref();
    } else {
      this.#leave();
    }
  }

  #join(): void {
    const { publisher, audienceKey } = this.opts;
    const now = Date.now();
    publisher
      .multi()
      .zadd(audienceKey, now + AUDIENCE_TTL_MS, this.#from)
      .zremrangebyscore(audienceKey, "-inf", now)
      .pexpire(audienceKey, AUDIENCE_TTL_MS)
      .exec()
      .catch((err: unknown) =>
        this.opts.logger.warn({ err: errorMessage(err) }, "live event relay: cannot join the audience"),
      );
  }

  #leave(): void {
    if (this.#refresh) clearInterval(this.#refresh);
    this.#refresh = null;
    this.opts.publisher
      .zrem(this.opts.audienceKey, this.#from)
      .catch((err: unknown) =>
        this.opts.logger.debug({ err: errorMessage(err) }, "live event relay: cannot leave the audience"),
      );
  }

  /** Forwards this process's live events; with `receive`, re-emits other processes' on `bus`. */
  async start(bus: EventBus, receive: boolean): Promise<void> {
    if (this.#unsubscribe) return;
    // Clients of other processes may watch this one's turns: all but the quiet ones (no audience).
    const release = bus.watch("run.delta", (sessionKey) => !this.#quiet.has(sessionKey));
    const off = bus.onAny((event, data) => {
      if (this.#replaying || !relayed.has(event)) return;
      if (this.#quiet.size > 0 && this.#quiet.has(sessionOf(event as Relayed, data))) return;
      this.#pending.push({ event: event as Relayed, data });
      if (!this.#flushing) {
        this.#flushing = true;
        setImmediate(() => this.#flush());
      }
    });
    this.#unsubscribe = () => {
      off();
      release();
    };
    if (!receive) return;
    const sub = this.opts.createSubscriber();
    this.#sub = sub;
    sub.on("error", (err: unknown) =>
      this.opts.logger.warn({ err: errorMessage(err) }, "live event relay: connection error"),
    );
    sub.on("message", (channel: string, raw: string) => {
      if (channel === this.opts.channel) this.#receive(bus, raw);
    });
    await sub.subscribe(this.opts.channel);
  }

  async stop(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    this.#pending = [];
    if (this.#listening) this.listening(false);
    const sub = this.#sub;
    this.#sub = null;
    if (sub) await closeClient(sub);
  }

  #flush(): void {
    this.#flushing = false;
    const events = this.#pending;
    this.#pending = [];
    if (events.length === 0 || !this.#unsubscribe) return;
    this.opts.publisher
      .publish(this.opts.channel, JSON.stringify({ from: this.#from, events }))
      .catch((err: unknown) =>
        this.opts.logger.debug({ err: errorMessage(err), events: events.length }, "live events not relayed"),
      );
  }

  #receive(bus: EventBus, raw: string): void {
    if (raw.startsWith(this.#ownPrefix)) return; // this process emitted them already
    if (!this.#listening) return; // no /ws client here to show them to
    let msg: z.infer<typeof relayMessageSchema>;
    try {
      const parsed = relayMessageSchema.safeParse(JSON.parse(raw));
      if (!parsed.success) throw new Error(parsed.error.issues[0]?.message ?? "invalid");
      msg = parsed.data;
    } catch (err) {
      this.opts.logger.warn({ err: errorMessage(err) }, "live event relay: unreadable message ignored");
      return;
    }
    if (msg.from === this.#from) return; // the same, written some other way
    this.#replaying = true;
    try {
      for (const { event, data } of msg.events) bus.emit(event as GatewayEventName, data as never);
    } finally {
      this.#replaying = false;
    }
  }
}

/** The session an event belongs to (`session.updated` carries the entry). */
function sessionOf(event: Relayed, data: unknown): string {
  const d = data as { sessionKey?: unknown; entry?: { key?: unknown } };
  const key = event === "session.updated" ? d.entry?.key : d.sessionKey;
  return typeof key === "string" ? key : "";
}

/**
 * Counts one holder of `key` in `counts` until the returned release is called (once; later calls
 * do nothing); the key leaves the map when its last holder releases it.
 */
function hold<K>(counts: Map<K, number>, key: K): () => void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const n = (counts.get(key) ?? 1) - 1;
    if (n > 0) counts.set(key, n);
    else counts.delete(key);
  };
}
