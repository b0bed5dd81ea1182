import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { PipelineKeys } from "../../src/pipeline/bullmq/keys.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix, startMonitor } from "../redis.js";

/**
 * On bullmq a turn may run in a worker process: its live events (streamed text, typing, transcript
 * and session updates) still reach the gateway's `/ws` clients, over Redis pub/sub, once each.
 */

type Frame = { event?: string; data?: Record<string, unknown> };

/** A `/ws` client of `app`, open, collecting every frame it receives. */
async function openWs(app: TestApp): Promise<{ ws: WebSocket; frames: Frame[] }> {
  const ws = new WebSocket(`${app.url!.replace("http", "ws")}/ws?token=${app.token}`);
  const frames: Frame[] = [];
  ws.on("message", (d) => frames.push(JSON.parse(d.toString())));
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  return { ws, frames };
}

describeRedis("live events from a worker reach the gateway's /ws", () => {
  const prefix = randomPrefix("live");
  const cfg = {
    storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
    queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix },
  };
  let gateway: TestApp;
  let worker: Awaited<ReturnType<typeof startTestWorker>>;

  beforeAll(async () => {
    gateway = await startTestApp(cfg, { listen: true });
    worker = await startTestWorker(cfg);
  }, 30_000);

  afterAll(async () => {
    await worker?.stop();
    await gateway?.stop();
    await dropPrefix(prefix);
  });

  it("re-emits a worker's streamed text and typing; every transcript event arrives once", async () => {
    const { ws, frames } = await openWs(gateway);
    const bus = worker.app.services.bus;
    bus.emit("run.typing", { runId: "r1", sessionKey: "agent:main:live", on: true });
    bus.emit("run.delta", { runId: "r1", sessionKey: "agent:main:live", text: "Hel" });
    bus.emit("run.delta", { runId: "r1", sessionKey: "agent:main:live", text: "lo" });
    bus.emit("run.started", { run: { runId: "r1" } as never }); // lifecycle events are the pipeline's: not relayed
    await eventually(() => frames.filter((f) => f.event === "run.delta").length === 2, 300, 10);
    const deltas = frames.filter((f) => f.event === "run.delta").map((f) => f.data?.text);
    expect(deltas).toEqual(["Hel", "lo"]);
    expect(frames.filter((f) => f.event === "run.typing")).toHaveLength(1);
    expect(frames.filter((f) => f.event === "run.started")).toHaveLength(0);

    // A gateway's own events go out once (not echoed back by the relay).
    gateway.app.services.bus.emit("run.delta", { runId: "r2", sessionKey: "agent:main:live", text: "own" });
    // And a real turn run by either process shows its transcript events on /ws exactly once.
    const sent = await gateway.rpc("chat.send", {
      sessionKey: "agent:main:live",
      message: "hi",
      timeoutSeconds: 20,
    });
    expect(sent.result).toMatchObject({ status: "ok" });
    await eventually(() => frames.filter((f) => f.event === "message.appended").length >= 2, 300, 10);
    await new Promise((r) => setTimeout(r, 100)); // a duplicate would arrive within a tick or two
    expect(frames.filter((f) => f.event === "run.delta" && f.data?.text === "own")).toHaveLength(1);
    const appended = frames.filter((f) => f.event === "message.appended");
    const ids = appended.map((f) => (f.data?.message as { id?: string } | undefined)?.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(appended.map((f) => (f.data?.message as { role?: string } | undefined)?.role)).toEqual(
      expect.arrayContaining(["user", "assistant"]),
    );
    ws.close();
  });
});

describeRedis("live events travel only while a /ws client can watch", () => {
  const prefix = randomPrefix("audience");
  const cfg = {
    storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
    queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix },
  };
  const keys = new PipelineKeys(`${prefix}:queue`);
  let gateway: TestApp;
  let worker: Awaited<ReturnType<typeof startTestWorker>>;
  let stopMonitor: (() => void) | undefined;
  const published: string[] = [];

  beforeAll(async () => {
    // the gateway runs no turns: every turn runs in the worker, so its events need the relay
    gateway = await startTestApp({ ...cfg, queue: { ...cfg.queue, runTurns: false } }, { listen: true });
    worker = await startTestWorker(cfg);
    stopMonitor = await startMonitor((args) => {
      if (String(args[0]).toLowerCase() === "publish" && args[1] === keys.live) published.push(args[2] ?? "");
    });
  }, 30_000);

  afterAll(async () => {
    stopMonitor?.();
    await worker?.stop();
    await gateway?.stop();
    await dropPrefix(prefix);
  });

  const send = async (sessionKey: string, message: string) => {
    const r = await gateway.rpc<{ status: string }>("chat.send", { sessionKey, message, timeoutSeconds: 20 });
    expect(r.result?.status, JSON.stringify(r)).toBe("ok");
  };

  it("a turn nobody watches publishes nothing; one sent right after a client connects is seen whole", async () => {
    await send("agent:main:unwatched", "hello"); // creating the session is told to other gateways
    await new Promise((r) => setTimeout(r, 200));
    published.length = 0;
    await send("agent:main:unwatched", "again");
    await new Promise((r) => setTimeout(r, 200)); // the turn's last commands reach the monitor
    expect(published).toEqual([]);

    const { ws, frames } = await openWs(gateway);
    await send("agent:main:watched", "hello"); // at once: the socket joined the audience as it opened
    await eventually(() => frames.filter((f) => f.event === "message.appended").length >= 2, 300, 10);
    const mine = frames.filter((f) => f.data?.sessionKey === "agent:main:watched");
    expect(
      mine
        .filter((f) => f.event === "message.appended")
        .map((f) => (f.data?.message as { role?: string } | undefined)?.role),
    ).toEqual(["user", "assistant"]);
    expect(mine.some((f) => f.event === "run.typing")).toBe(true);
    expect(published.length).toBeGreaterThan(0);
    expect(published.every((raw) => !raw.includes("agent:main:unwatched"))).toBe(true);
    expect(published.some((raw) => raw.includes('"run.typing"'))).toBe(true);

    // the last client leaves: the gateway leaves the audience, and turns are quiet again
    const redis = new Redis(REDIS_URL);
    try {
      expect(await redis.zcard(keys.liveAudience)).toBe(1);
      ws.close();
      await eventually(async () => (await redis.zcard(keys.liveAudience)) === 0, 300, 10);
    } finally {
      redis.disconnect();
    }
    const count = published.length;
    await send("agent:main:watched", "again");
    await new Promise((r) => setTimeout(r, 200));
    expect(published.length).toBe(count);
  });
});
