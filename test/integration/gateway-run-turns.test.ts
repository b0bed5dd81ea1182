import { afterEach, expect, it } from "vitest";
import { checkDriverChoice } from "../../src/app/drivers.js";
import { parseConfig } from "../../src/config/index.js";
import { PipelineKeys } from "../../src/pipeline/bullmq/keys.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix, newRedisClient } from "../redis.js";

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

  it("a worker hears cancel and steer but not run events: a turn's finish wakes only the gateways", async () => {
    const shared = cfg();
    const gateway = await startTestApp(shared);
    stops.push(() => gateway.stop());
    const worker = await startTestWorker(shared);
    stops.push(() => worker.stop());
    expect((await send(gateway, "agent:main:quiet-worker", 20)).result?.status).toBe("ok");
    const keys = new PipelineKeys(`${shared.queue.prefix}:queue`);
    const redis = newRedisClient();
    stops.push(async () => void (await redis.quit()));
    const listeners = async (channel: string) =>
      ((await redis.call("PUBSUB", "NUMSUB", channel)) as [string, number])[1];
    expect(await listeners(keys.bus)).toBe(2);
    expect(await listeners(keys.runEvents)).toBe(1);
  });

  it("is refused with the local queue, naming the key", () => {
    const config = parseConfig({ queue: { runTurns: false } });
    expect(() => checkDriverChoice(config, "gateway", "127.0.0.1", () => true)).toThrow(/queue\.runTurns/);
  });
});
