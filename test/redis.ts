/**
 * Redis test helpers (API.md §1): Redis-backed suites run against REDIS_URL; where no Redis
 * answers they are skipped with one clear line — except under CI=true, where a missing Redis
 * fails the run. Every suite uses its own key prefix (`randomPrefix()`) and removes its keys.
 */
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
