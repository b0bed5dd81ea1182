import { Redis as IORedis } from "ioredis";
import { expect, it } from "vitest";
import { BullmqCronDriver } from "../../src/cron/bullmq.js";
import { silentLogger } from "../../src/log.js";
import { startTestApp } from "../harness.js";
import { describeRedis, ownRedis } from "../redis.js";

/**
 * Stopping never hangs on Redis: with Redis gone (its clients between reconnect attempts), the
 * cron driver and a whole redis+bullmq gateway still stop. Before the bounded closes in
 * `src/redis/close.ts`, BullMQ's graceful worker close waited forever for its blocking
 * connection to end.
 */

/** Resolves "stopped", or "hung" when `p` takes longer than `ms`. */
const settles = (p: Promise<void>, ms: number) =>
  Promise.race([p.then(() => "stopped"), new Promise((r) => setTimeout(() => r("hung"), ms).unref())]);

describeRedis("stop while Redis is down", () => {
  it("the BullMQ cron driver stops", { timeout: 40_000 }, async () => {
    const redis = await ownRedis();
    const cmd = new IORedis(redis.url, { maxRetriesPerRequest: null });
    const blocking: IORedis[] = [];
    try {
      const d = new BullmqCronDriver({
        connection: cmd,
        createBlockingConnection: () => {
          const c = new IORedis(redis.url, { maxRetriesPerRequest: null });
          blocking.push(c);
          return c;
        },
        prefix: "{stopdown}",
        logger: silentLogger(),
      });
      await d.start([], async () => undefined);
      await redis.kill();
      await new Promise((r) => setTimeout(r, 300));
      expect(await settles(d.stop(), 25_000)).toBe("stopped");
    } finally {
      cmd.disconnect();
      for (const c of blocking) c.disconnect();
      await redis.cleanup();
    }
  });

  it("a redis + bullmq gateway stops", { timeout: 40_000 }, async () => {
    const redis = await ownRedis();
    try {
      const t = await startTestApp({
        storage: { driver: "redis", redisUrl: redis.url, prefix: "stopdown" },
        queue: { driver: "bullmq", redisUrl: redis.url, prefix: "stopdown" },
      });
      const sent = await t.rpc("chat.send", { sessionKey: "main", message: "hi", timeoutSeconds: 20 });
      expect(sent.result).toMatchObject({ status: "ok" });
      await redis.kill();
      await new Promise((r) => setTimeout(r, 300));
      expect(await settles(t.stop(), 25_000)).toBe("stopped");
    } finally {
      await redis.cleanup();
    }
  });
});
