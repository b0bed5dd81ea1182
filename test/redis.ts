/**
 * Redis test helpers (API.md §1): Redis-backed suites run against REDIS_URL; where no Redis
 * answers they are skipped with one clear line — except under CI=true, where a missing Redis
 * fails the run. Every suite uses its own key prefix (`randomPrefix()`) and removes its keys.
 */
import { connect } from "node:net";
import { Redis } from "ioredis";
import { describe } from "vitest";
import { REDIS_URL } from "./helpers.js";

let available: Promise<boolean> | undefined;

/** Whether a Redis answers PING at REDIS_URL (asked once per test file, within ~1 s). */
export function redisAvailable(): Promise<boolean> {
  available ??= (async () => {
    const probe = new Redis(REDIS_URL, {
      lazyConnect: true,
      connectTimeout: 1000,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    probe.on("error", () => {}); // the failure is the answer
    try {
      await probe.connect();
      return (await probe.ping()) === "PONG";
    } catch {
      return false;
    } finally {
      probe.disconnect();
    }
  })();
  return available;
}

const up = await redisAvailable();

/**
 * `describe` when Redis answers; otherwise `describe.skip` plus one console line, or — under
 * CI=true — an error, so a CI run without Redis fails instead of passing emptily.
 */
export function describeRedis(name: string, fn: () => void): void {
  if (up) {
    describe(name, fn);
    return;
  }
  if (process.env.CI === "true") {
    throw new Error(`Redis is required under CI=true but does not answer at ${REDIS_URL} (suite "${name}")`);
  }
  console.warn(`[redis] no Redis at ${REDIS_URL}: skipping "${name}" (under CI=true this fails)`);
  describe.skip(name, fn);
}

/** A client for tests (the test creates and quits it, as the composition root would). */
export function newRedisClient(): Redis {
  return new Redis(REDIS_URL, { maxRetriesPerRequest: 3 });
}

/**
 * MONITOR on a plain socket: `onCommand` gets every command Redis runs from now on (its arguments,
 * and its source: the client's address, or "lua" inside a script). Not ioredis's monitor(): under
 * load its "OK" and the first lines can arrive in one read, before it counts as monitoring, and
 * it then throws "Command queue state error". Resolves once MONITOR is on; returns the stop.
 */
export async function startMonitor(onCommand: (args: string[], source: string) => void): Promise<() => void> {
  const url = new URL(REDIS_URL);
  const sock = connect(Number(url.port || 6379), url.hostname);
  sock.setEncoding("utf8"); // MONITOR escapes every non-printable byte (\xNN)
  let buf = "";
  let on = false;
  await new Promise<void>((resolve, reject) => {
    sock.once("error", reject);
    sock.on("data", (chunk: string) => {
      buf += chunk;
      for (let i = buf.indexOf("\r\n"); i >= 0; i = buf.indexOf("\r\n")) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!on) {
          if (line !== "+OK") return reject(new Error(`MONITOR: ${line}`));
          on = true;
          resolve();
          continue;
        }
        // +<time> [<db> <address>|lua] "cmd" "arg" …
        const m = /^\+\S+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
        if (!m) continue;
        const args = [...m[2]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((a) => unescapeMonitor(a[1]!));
        onCommand(args, m[1]!);
      }
    });
    sock.write("MONITOR\r\n");
  });
  return () => sock.destroy();
}

function unescapeMonitor(s: string): string {
  return s.replace(/\\(x[0-9a-fA-F]{2}|.)/g, (_, e: string) => {
    if (e.length === 3) return String.fromCharCode(Number.parseInt(e.slice(1), 16));
    return ({ n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b" } as Record<string, string>)[e] ?? e;
  });
}

/** Deletes every key matching a SCAN pattern (SCAN MATCH + UNLINK); returns how many. */
export async function unlinkMatching(client: Redis, pattern: string): Promise<number> {
  let cursor = "0";
  let n = 0;
  do {
    const [next, found] = await client.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    if (found.length > 0) n += await client.unlink(...found);
    cursor = next;
  } while (cursor !== "0");
  return n;
}

/** Deletes every key a test wrote under its random prefix. */
export async function dropPrefix(prefix: string): Promise<void> {
  const redis = newRedisClient();
  await unlinkMatching(redis, `*${prefix}*`);
  await redis.quit();
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const net = await import("node:net");
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as import("node:net").AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A test-owned redis-server on a free port with AOF in a temp dir (fault tests): `kill()` is a
 * SIGKILL, `start()` brings it back on the same port and data dir, `cleanup()` stops it for good.
 */
export async function ownRedis(): Promise<{
  url: string;
  start(): Promise<void>;
  kill(): Promise<void>;
  cleanup(): Promise<void>;
}> {
  const { spawn } = await import("node:child_process");
  const { mkdtempSync, rmSync } = await import("node:fs");
  const os = await import("node:os");
  const path = await import("node:path");
  const dir = mkdtempSync(path.join(os.tmpdir(), "sb-own-redis-"));
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let proc: import("node:child_process").ChildProcess | null = null;
  const start = async () => {
    const args = ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", ""];
    args.push("--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction");
    proc = spawn("redis-server", args, { stdio: "ignore" });
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    probe.on("error", () => {});
    try {
      for (let i = 0; i < 200; i++) {
        if (probe.status !== "ready") await probe.connect().catch(() => undefined);
        if ((await probe.ping().catch(() => null)) === "PONG") return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`redis-server on port ${port} did not answer`);
    } finally {
      probe.disconnect();
    }
  };
  const kill = async () => {
    const p = proc;
    proc = null;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  };
  await start();
  return {
    url,
    start,
    kill,
    async cleanup() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
