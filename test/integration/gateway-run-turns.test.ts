import { afterEach, expect, it } from "vitest";
import { checkDriverChoice } from "../../src/app/drivers.js";
import { parseConfig } from "../../src/config/index.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * `queue.runTurns: false`: a gateway that only accepts, streams and delivers, while
 * `switchboard worker` processes run every turn (the scale-out where model calls and tools stay
 * off the process that holds the channels).
 */
describeRedis("queue.runTurns: false keeps turns off the gateway", () => {
  const stops: Array<() => Promise<void>> = [];
  const prefixes: string[] = [];
  afterEach(async () => {
    for (const s of stops.splice(0).reverse()) await s();
    for (const p of prefixes.splice(0)) await dropPrefix(p);
  });

  const cfg = (runTurns?: boolean) => {
    const prefix = randomPrefix("runturns");
    prefixes.push(prefix);
    return {
      storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
      queue: {
        driver: "bullmq" as const,
        redisUrl: REDIS_URL,
        prefix,
        ...(runTurns === undefined ? {} : { runTurns }),
      },
    };
  };
  const send = (gw: TestApp, sessionKey: string, timeoutSeconds: number) =>
    gw.rpc<{ status: string; runId: string; reply?: string }>("chat.send", {
      sessionKey,
      message: "hi",
      timeoutSeconds,
    });

  it("the turn waits for a worker, which then runs it; by default the gateway runs it itself", async () => {
    const off = cfg(false);
    const gateway = await startTestApp(off);
    stops.push(() => gateway.stop());
    const waited = await send(gateway, "agent:main:offloaded", 1);
    expect(waited.ok).toBe(true);
    expect(waited.result?.status).toBe("timeout"); // accepted, but nobody here runs it
    const runId = waited.result!.runId;
    const queued = await gateway.rpc<{ status: string }>("runs.get", { runId });
    expect(queued.result?.status).toBe("queued");

    const worker = await startTestWorker(off);
    stops.push(() => worker.stop());
    const done = await gateway.rpc<{ status: string }>("agent.wait", { runId, timeoutMs: 20_000 });
    expect(done.result?.status).toBe("ok");

    // the default: a gateway alone runs its turns
    const on = await startTestApp(cfg());
    stops.push(() => on.stop());
    expect((await send(on, "agent:main:here", 20)).result?.status).toBe("ok");
  });

  it("is refused with the local queue, naming the key", () => {
    const config = parseConfig({ queue: { runTurns: false } });
    expect(() => checkDriverChoice(config, "gateway", "127.0.0.1", () => true)).toThrow(/queue\.runTurns/);
  });
});
