import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AdapterRegistry } from "../../src/delivery/index.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { type OtlpFake, type ReceivedSpan, startOtlpFake } from "../fakes/otlp.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * Traces over OTLP/HTTP (API.md §8.6, issue 51), received by a loopback collector: one trace per
 * accepted turn (`switchboard.enqueue` → `switchboard.turn` → model, tool, delivery spans, each with
 * `switchboard.session_key`), across the BullMQ hop to a worker and back to the gateway's delivery,
 * and sub-agent runs and announces as traces of their own linked to the span that caused them.
 */

const KEY = "agent:main:traced";

async function routedSession(t: TestApp, channel: MemoryChannel, key: string): Promise<void> {
  (t.app.services.channels as AdapterRegistry).add(channel);
  await channel.start(async () => {});
  const now = Date.now();
  await t.app.services.store.sessions.put({
    key,
    sessionId: `s-${key.split(":").at(-1)}`,
    agentId: "main",
    createdAt: now,
    updatedAt: now,
    deliveryContext: { channel: "memory", to: "chat-t", accountId: "default" },
  });
}

function one(spans: ReceivedSpan[], pred: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const hits = spans.filter(pred);
  expect(hits, what).toHaveLength(1);
  return hits[0] as ReceivedSpan;
}

function modelCfg(fake: OpenAIFake) {
  return {
    default: "fake/gpt-test",
    providers: { fake: { kind: "openai" as const, baseUrl: fake.url, maxRetries: 0 } },
  };
}

describe("traces on the local driver", () => {
  let fake: OpenAIFake;
  let otlp: OtlpFake;
  let t: TestApp;
  const channel = new MemoryChannel();

  beforeAll(async () => {
    fake = await startOpenAIFake();
    otlp = await startOtlpFake();
    t = await startTestApp({
      models: modelCfg(fake),
      telemetry: {
        otlp: { endpoint: `${otlp.url}/`, headers: { "x-collector-key": "k1" } },
        serviceName: "sb-test",
      },
    });
    await routedSession(t, channel, KEY);
  });
  afterAll(async () => {
    await t?.stop();
    await fake?.close();
    await otlp?.close();
  });

  /** A delivered chat.send turn whose model calls `tool` once, then answers `reply`. */
  async function toolTurn(tool: string, args: Record<string, unknown>, reply: string, message: string) {
    fake.enqueue({ toolCalls: [{ name: tool, arguments: args }] }, { text: reply });
    const sent = await t.rpc("chat.send", { sessionKey: KEY, message, deliver: true, timeoutSeconds: 15 });
    expect(sent.result.status).toBe("ok");
  }

  it("one trace per RPC turn: enqueue → turn → model, tool, delivery", { timeout: 20_000 }, async () => {
    await toolTurn("sessions_list", {}, "listed", "list");
    await eventually(() => channel.sent.some((m) => m.text === "listed"), 500, 10);
    const spans = await otlp.waitFor((s) => s.filter((x) => x.name === "switchboard.delivery").length >= 1);

    const enqueue = one(spans, (s) => s.name === "switchboard.enqueue", "enqueue");
    expect(enqueue.parentSpanId).toBeUndefined();
    const trace = spans.filter((s) => s.traceId === enqueue.traceId);
    const turn = one(trace, (s) => s.name === "switchboard.turn", "turn");
    expect(turn.parentSpanId).toBe(enqueue.spanId);
    const models = trace.filter((s) => s.name === "switchboard.model");
    expect(models).toHaveLength(2);
    for (const m of models) {
      expect(m.parentSpanId).toBe(turn.spanId);
      expect(m.attributes["switchboard.model"]).toBe("fake/gpt-test");
    }
    const tool = one(trace, (s) => s.name === "switchboard.tool", "tool");
    expect(tool).toMatchObject({
      parentSpanId: turn.spanId,
      attributes: { "switchboard.tool": "sessions_list" },
    });
    const delivery = one(trace, (s) => s.name === "switchboard.delivery", "delivery");
    expect(delivery.parentSpanId).toBe(turn.spanId);
    for (const s of trace) {
      expect(s.attributes["switchboard.session_key"], s.name).toBe(KEY);
      expect(s.service).toBe("sb-test");
    }
    expect(new Set(otlp.paths)).toEqual(new Set(["/v1/traces"]));
    expect(otlp.headers[0]?.["x-collector-key"]).toBe("k1");
  });

  it("what a tool delivers is a child of that tool's span (passed to it, no active span)", {
    timeout: 20_000,
  }, async () => {
    const before = otlp.spans.length;
    await toolTurn("message", { text: "a note from the tool" }, "noted", "send a note");
    await eventually(() => channel.sent.some((m) => m.text === "noted"), 500, 10);
    expect(channel.sent.some((m) => m.text === "a note from the tool")).toBe(true);
    const spans = await otlp.waitFor(
      (s) => s.slice(before).filter((x) => x.name === "switchboard.delivery").length >= 2,
    );
    const fresh = spans.slice(before);
    const tool = one(
      fresh,
      (s) => s.name === "switchboard.tool" && s.attributes["switchboard.tool"] === "message",
      "message tool",
    );
    const turn = one(fresh, (s) => s.spanId === tool.parentSpanId, "turn");
    expect(turn.name).toBe("switchboard.turn");
    const deliveries = fresh.filter((s) => s.name === "switchboard.delivery" && s.traceId === turn.traceId);
    expect(deliveries.map((d) => d.parentSpanId).sort()).toEqual([turn.spanId, tool.spanId].sort());
  });

  it("a sub-agent run is a trace of its own linked to the spawn; its announce joins the child's trace", {
    timeout: 20_000,
  }, async () => {
    const before = otlp.spans.length;
    await toolTurn("sessions_spawn", { task: "say hi" }, "spawned", "spawn one");
    const spans = await otlp
      .waitFor((s) => {
        const child = s
          .slice(before)
          .find((x) => x.name === "switchboard.turn" && x.attributes["switchboard.origin"] === "spawn");
        return !!child && s.some((x) => x.name === "switchboard.delivery" && x.traceId === child.traceId);
      }, 15_000)
      .catch((err) => {
        console.log(
          JSON.stringify(otlp.spans.slice(before).map((x) => [x.name, x.attributes, x.links.length])),
        );
        throw err;
      });
    const fresh = spans.slice(before);
    const spawnTool = one(
      fresh,
      (s) => s.name === "switchboard.tool" && s.attributes["switchboard.tool"] === "sessions_spawn",
      "spawn tool",
    );
    const childTurn = one(
      fresh,
      (s) => s.name === "switchboard.turn" && s.attributes["switchboard.origin"] === "spawn",
      "child turn",
    );
    expect(childTurn.traceId).not.toBe(spawnTool.traceId);
    const childEnqueue = one(fresh, (s) => s.spanId === childTurn.parentSpanId, "child enqueue");
    expect(childEnqueue.links).toEqual([{ traceId: spawnTool.traceId, spanId: spawnTool.spanId }]);
    expect(String(childTurn.attributes["switchboard.session_key"])).toContain(":subagent:");

    // The requester was idle: the report is delivered straight to its chat, in the child's trace.
    const announce = one(
      fresh,
      (s) => s.name === "switchboard.delivery" && s.traceId === childTurn.traceId,
      "announce delivery",
    );
    expect(announce.parentSpanId).toBe(childTurn.spanId);
    expect(announce.attributes["switchboard.session_key"]).toBe(KEY);
  });
});

describeRedis("traces across the BullMQ hop", () => {
  const prefix = randomPrefix("traces");
  let fake: OpenAIFake;
  let otlp: OtlpFake;
  let gateway: TestApp;
  let worker: Awaited<ReturnType<typeof startTestWorker>>;
  const channel = new MemoryChannel();

  beforeAll(async () => {
    fake = await startOpenAIFake();
    otlp = await startOtlpFake();
    const cfg = {
      models: modelCfg(fake),
      storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
      telemetry: { otlp: { endpoint: otlp.url } },
    };
    gateway = await startTestApp({
      ...cfg,
      queue: { driver: "bullmq", redisUrl: REDIS_URL, prefix, runTurns: false },
    });
    worker = await startTestWorker({ ...cfg, queue: { driver: "bullmq", redisUrl: REDIS_URL, prefix } });
    await routedSession(gateway, channel, KEY);
  }, 30_000);
  afterAll(async () => {
    await worker?.stop();
    await gateway?.stop();
    await fake?.close();
    await otlp?.close();
    await dropPrefix(prefix);
  });

  it("the job carries the trace: the worker's turn and the gateway's delivery join it", {
    timeout: 30_000,
  }, async () => {
    fake.enqueue({ text: "from the worker" });
    const sent = await gateway.rpc("chat.send", {
      sessionKey: KEY,
      message: "hop",
      deliver: true,
      timeoutSeconds: 20,
    });
    expect(sent.result.status).toBe("ok");
    await eventually(() => channel.sent.some((m) => m.text === "from the worker"), 1000, 10);
    const spans = await otlp.waitFor(
      (s) => s.filter((x) => x.name === "switchboard.delivery").length >= 2,
      15_000,
    );
    const enqueue = one(spans, (s) => s.name === "switchboard.enqueue", "enqueue");
    const turn = one(spans, (s) => s.name === "switchboard.turn", "turn");
    expect(turn.traceId).toBe(enqueue.traceId);
    expect(turn.parentSpanId).toBe(enqueue.spanId);
    const trace = spans.filter((s) => s.traceId === enqueue.traceId);
    expect(trace.some((s) => s.name === "switchboard.model" && s.parentSpanId === turn.spanId)).toBe(true);
    // The worker's attempt (no channel: handed off) and the gateway's post, both in the trace.
    const deliveries = trace.filter((s) => s.name === "switchboard.delivery");
    expect(deliveries.length).toBeGreaterThanOrEqual(2);
    expect(deliveries.every((d) => d.parentSpanId === turn.spanId)).toBe(true);
  });
});
