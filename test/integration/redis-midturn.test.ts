import { Writable } from "node:stream";
import { afterEach, expect, it } from "vitest";
import type { AdapterRegistry } from "../../src/delivery/index.js";
import { createLogger } from "../../src/log.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";
import { describeRedis, ownRedis } from "../redis.js";

/**
 * Redis stopped mid-turn (issue 11): a test-owned redis-server is SIGKILLed while the model call
 * of an accepted turn is open, the model answers while Redis is down, and Redis comes back from
 * its append-only file after the turn's lock ran out. The turn must be answered exactly once:
 * ok, its reply posted once, no INTERNAL anywhere (RPC answers or the run record).
 */

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 30_000);

describeRedis("Redis stopped mid-turn", () => {
  it("the accepted turn is answered exactly once after Redis is back, with no INTERNAL error", {
    timeout: 60_000,
  }, async () => {
    const redis = await ownRedis();
    cleanups.push(() => redis.cleanup());
    const fake = await startOpenAIFake();
    cleanups.push(() => fake.close());
    let openGate!: () => void;
    const gate = new Promise<void>((r) => {
      openGate = r;
    });
    // the same answer for a re-run of the turn (attempt 2 after the lock ran out)
    fake.enqueue({ text: "the answer", until: gate }, { text: "the answer" }, { text: "the answer" });
    const logs: Array<Record<string, unknown>> = [];
    const logger = createLogger({
      level: "warn",
      destination: new Writable({
        write(chunk, _enc, cb) {
          for (const l of String(chunk).split("\n")) if (l.trim()) logs.push(JSON.parse(l));
          cb();
        },
      }),
    });
    let t: TestApp | null = await startTestApp(
      {
        storage: { driver: "redis", redisUrl: redis.url, prefix: "midturn" },
        queue: {
          driver: "bullmq",
          redisUrl: redis.url,
          prefix: "midturn",
          lockDurationMs: 1000,
          stalledIntervalMs: 1000,
        },
        models: {
          default: "fake/m",
          providers: { fake: { kind: "openai", baseUrl: fake.url, maxRetries: 0 } },
        },
      },
      { logger },
    );
    cleanups.push(() => t?.stop());
    const channel = new MemoryChannel();
    (t.app.services.channels as AdapterRegistry).add(channel);
    await channel.start(async () => {});
    const now = Date.now();
    await t.app.services.store.sessions.put({
      key: "agent:main:mid",
      sessionId: "mid-session",
      agentId: "main",
      createdAt: now,
      updatedAt: now,
      deliveryContext: { channel: "memory", to: "chat-mid", accountId: "default" },
    });

    const sent = await t.rpc("chat.send", {
      sessionKey: "agent:main:mid",
      message: "question",
      timeoutSeconds: 0,
      deliver: true,
    });
    expect(sent.result).toMatchObject({ status: "accepted" });
    const runId = sent.result.runId as string;
    await fake.waitForRequests(1); // the turn is running, its model call open

    await redis.kill();
    openGate(); // the model answers while Redis is down: the turn cannot record anything
    // Redis stays down past the turn's lock (1 s) and a stall check; RPC says UNAVAILABLE meanwhile
    const codes: string[] = [];
    const downUntil = Date.now() + 2500;
    while (Date.now() < downUntil) {
      for (const [method, params] of [
        ["runs.get", { runId }],
        ["sessions.history", { sessionKey: "agent:main:mid" }],
      ] as const) {
        const r = await t.rpc(method, params);
        if (!r.ok) codes.push(r.error!.code);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(codes.length).toBeGreaterThan(0);
    expect(codes.filter((c) => c !== "UNAVAILABLE")).toEqual([]);

    await redis.start();
    let run: { status: string; reply?: string; error?: string } | null = null;
    for (let i = 0; i < 100 && !run; i++) {
      const w = await t.rpc("agent.wait", { runId, timeoutMs: 5_000 });
      if (w.ok && w.result.status !== "timeout" && w.result.status !== "running") run = w.result;
      else if (!w.ok) {
        expect(w.error?.code).toBe("UNAVAILABLE"); // while the clients reconnect
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect(run).toMatchObject({ status: "ok", reply: "the answer" });
    // stopping drains whatever is still in flight (an interrupted first attempt): then count
    await t.stop();
    t = null;
    expect(channel.sent.map((m) => m.text)).toEqual(["the answer"]);
    expect(logs.filter((l) => JSON.stringify(l).includes("INTERNAL"))).toEqual([]);
    const h = await (async () => {
      const again = await startTestApp({
        storage: { driver: "redis", redisUrl: redis.url, prefix: "midturn" },
        queue: { driver: "bullmq", redisUrl: redis.url, prefix: "midturn" },
      });
      try {
        return (await again.rpc("sessions.history", { sessionKey: "agent:main:mid" })).result;
      } finally {
        await again.stop();
      }
    })();
    expect(h.messages.map((m: { role: string; content: string }) => `${m.role}:${m.content}`)).toEqual([
      "user:question",
      "assistant:the answer",
    ]);
  });
});
