import { afterEach, expect, it } from "vitest";
import { startTestApp, startTestWorker } from "../harness.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * Usage counts on storage.driver "redis" (API.md §8.4): a gateway reports the turns a worker ran,
 * and a gateway started afterwards still has them.
 */
describeRedis("usage counts shared through Redis", () => {
  const stops: Array<() => Promise<void>> = [];
  const prefix = randomPrefix("usage-app");
  afterEach(async () => {
    for (const s of stops.splice(0).reverse()) await s();
    await dropPrefix(prefix);
  });

  it("the gateway counts what the worker ran; a new gateway reads the same totals", async () => {
    const cfg = {
      storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
      queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix, runTurns: false },
    };
    const gateway = await startTestApp(cfg);
    stops.push(() => gateway.stop());
    const worker = await startTestWorker(cfg);
    stops.push(() => worker.stop());
    for (const key of ["agent:main:a", "agent:main:b"]) {
      const r = await gateway.rpc("chat.send", { sessionKey: key, message: "hi", timeoutSeconds: 20 });
      expect(r.result?.status).toBe("ok");
    }
    // the worker's counting script is sent as its turn ends, not awaited by it
    const day = await eventually(
      async () => {
        const r = (await gateway.rpc("usage.get", { scope: "global", period: "day" })).result;
        return r?.runs === 2 ? r : null;
      },
      500,
      20,
    );
    expect(day.tokens.input).toBeGreaterThan(0);
    await gateway.stop();
    stops.splice(0, 1);

    const again = await startTestApp({ ...cfg, queue: { ...cfg.queue, runTurns: true } });
    stops.push(() => again.stop());
    expect((await again.rpc("usage.get", { scope: "global", period: "month" })).result.runs).toBe(2);
    const rows = (await again.rpc("usage.list", { by: "session" })).result.rows;
    expect(rows.map((r: { session: string }) => r.session).sort()).toEqual(["agent:main:a", "agent:main:b"]);
    const daily = (await again.rpc("usage.list", { by: "agent", days: 2 })).result.rows;
    expect(daily).toMatchObject([{ agent: "main", runs: 2 }]);
  });
});
