import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { startTestApp } from "../harness.js";
import { REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * `storage.transcriptCacheChars` sizes the transcript tail cache of either store driver (the
 * bench's 256 long sessions overflow the 8M-char default), and 0 turns it off; `health` shows
 * the size in use.
 */

async function cacheOf(overrides: Parameters<typeof startTestApp>[0]) {
  const t = await startTestApp(overrides);
  try {
    const h = await t.rpc<{ transcriptCache?: { maxChars: number } }>("health");
    expect(h.ok).toBe(true);
    return h.result?.transcriptCache ?? null;
  } finally {
    await t.stop();
  }
}

describe("storage.transcriptCacheChars", () => {
  it("sizes the fs store's cache, and 0 turns it off", async () => {
    expect(await cacheOf({})).toMatchObject({ maxChars: 12 * 1024 * 1024 });
    expect(await cacheOf({ storage: { transcriptCacheChars: 32 * 1024 * 1024 } })).toMatchObject({
      maxChars: 32 * 1024 * 1024,
    });
    expect(await cacheOf({ storage: { transcriptCacheChars: 0 } })).toBeNull();
  });

  it("is a whole number of characters, named when wrong", () => {
    for (const bad of [-1, 1.5, "8M"]) {
      expect(() => parseConfig({ storage: { transcriptCacheChars: bad } })).toThrow(
        /storage\.transcriptCacheChars/,
      );
    }
  });
});

describeRedis("storage.transcriptCacheChars on redis", () => {
  it("sizes the redis store's cache", async () => {
    const prefix = randomPrefix("tcache");
    try {
      const cache = await cacheOf({
        storage: { driver: "redis", redisUrl: REDIS_URL, prefix, transcriptCacheChars: 3_000_000 },
        queue: { driver: "bullmq", redisUrl: REDIS_URL, prefix },
      });
      expect(cache).toMatchObject({ maxChars: 3_000_000 });
    } finally {
      await dropPrefix(prefix);
    }
  });
});
