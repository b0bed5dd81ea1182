import { afterAll, beforeAll, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import { type AnthropicFake, startAnthropicFake } from "../fakes/anthropic.js";
import { type FakeChatReply, type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";
import { assistantLines, failoverModels } from "./failover-fixture.js";

/**
 * Model failover on the bullmq driver (API.md §8.4): the gateway only accepts (runTurns false), a
 * worker runs every turn; run records, transcript usage and the circuit breaker (in Redis) are
 * read back through the gateway, another process.
 */
describeRedis("failover on bullmq (a worker runs the turns)", () => {
  let oa: OpenAIFake;
  let an: AnthropicFake;
  let gateway: TestApp;
  let worker: { stop(): Promise<void> };
  const prefix = randomPrefix("failover");

  beforeAll(async () => {
    oa = await startOpenAIFake();
    an = await startAnthropicFake();
    const cfg = (runTurns: boolean): Partial<ConfigInput> => ({
      storage: { driver: "redis", redisUrl: REDIS_URL, prefix },
      queue: { driver: "bullmq", redisUrl: REDIS_URL, prefix, runTurns },
      models: failoverModels({
        oa,
        an,
        failover: { maxRetryAfterMs: 300, cooldownSeconds: 60, failuresToOpen: 3 },
      }),
    });
    gateway = await startTestApp(cfg(false));
    worker = await startTestWorker(cfg(true));
  }, 30_000);
  afterAll(async () => {
    await worker?.stop();
    await gateway?.stop();
    await oa?.close();
    await an?.close();
    await dropPrefix(prefix);
  }, 30_000);

  let seq = 0;
  async function send() {
    const sessionKey = `agent:main:bq${++seq}`;
    const r = await gateway.rpc("chat.send", { sessionKey, message: "hi", timeoutSeconds: 20 });
    expect(r.ok, JSON.stringify(r.error)).toBe(true);
    return {
      sessionKey,
      sent: r.result,
      run: (await gateway.rpc("runs.get", { runId: r.result.runId })).result,
    };
  }

  const classes: Array<[string, FakeChatReply[]]> = [
    ["rate_limited", [{ status: 429, headers: { "retry-after": "30" } }]],
    ["overloaded", [{ status: 529 }]],
    ["server", [{ status: 500 }, { status: 500 }]],
    ["timeout", [{ delayMs: 3000 }]],
    ["connection", [{ drop: true }]],
    ["empty", [{ text: "" }]],
    ["auth", [{ status: 401 }]],
    ["billing", [{ status: 429, errorCode: "insufficient_quota" }]],
  ];

  it("each error class moves to the fallback; runs.get and the transcript name the models", async () => {
    for (const [cls, replies] of classes) {
      oa.enqueue(...replies);
      an.enqueue({ text: `fallback after ${cls}` });
      const { sessionKey, sent, run } = await send();
      expect(sent, cls).toMatchObject({ status: "ok", reply: `fallback after ${cls}` });
      expect(run, cls).toMatchObject({ model: "an/claude", fallbacks: [{ model: "oa/gpt", class: cls }] });
      const entry = await gateway.app.services.store.sessions.get(sessionKey);
      expect(entry?.lastModel).toBe("an/claude");
      expect((await assistantLines(gateway, sessionKey))[0]?.usage?.model).toBe("an/claude");
      // a success between classes keeps the primary's circuit closed
      oa.enqueue({ text: "primary ok" });
      expect((await send()).run.model).toBe("oa/gpt");
    }
    oa.enqueue({ status: 400 });
    const bad = await send();
    expect(bad.sent.status).toBe("error");
    expect(bad.run.error).toMatch(/invalid_request/);
  }, 60_000);

  it("the circuit is shared in Redis: opened by the worker's calls, seen by the gateway, the model skipped", async () => {
    for (let i = 0; i < 3; i++) {
      oa.enqueue({ status: 529 });
      an.enqueue({ text: "fallback" });
      await send();
    }
    // the gateway ran none of these calls: it reads the worker's failures from Redis
    const health = await gateway.rpc("health");
    expect(health.result.models["oa/gpt"]).toMatchObject({
      state: "open",
      failures: 3,
      lastClass: "overloaded",
    });
    const before = oa.chatRequests().length;
    an.enqueue({ text: "fallback" });
    const skipped = await send();
    expect(oa.chatRequests().length).toBe(before);
    expect(skipped.run.fallbacks).toEqual([{ model: "oa/gpt", class: "overloaded", skipped: true }]);
  }, 30_000);
});
