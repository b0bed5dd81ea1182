import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import { type AnthropicFake, type FakeAnthropicReply, startAnthropicFake } from "../fakes/anthropic.js";
import { type FakeChatReply, type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";
import { assistantLines, failoverModels } from "./failover-fixture.js";

/**
 * Model failover (API.md §8.4), local queue: an OpenAI-compatible primary and an Anthropic
 * fallback on loopback, one test per error class. The providers keep `maxRetries: 2` in config:
 * the counts below prove the chain turned the providers' own retries off.
 */

let oa: OpenAIFake;
let an: AnthropicFake;

beforeAll(async () => {
  oa = await startOpenAIFake();
  an = await startAnthropicFake();
});
afterAll(async () => {
  await oa.close();
  await an.close();
});

function config(
  failover: Record<string, number> = {},
  primary = "oa/gpt",
  fallbacks = ["an/claude"],
): Partial<ConfigInput> {
  return {
    models: failoverModels({
      oa,
      an,
      failover: { maxRetryAfterMs: 400, cooldownSeconds: 60, failuresToOpen: 1000, ...failover },
      primary,
      fallbacks,
      oaExtra: { models: { gpt: { price: { inputPerMTok: 1, outputPerMTok: 2 } } } },
    }),
  };
}

let seq = 0;
async function send(t: TestApp, text = "hi") {
  const sessionKey = `agent:main:fo${++seq}`;
  const r = await t.rpc("chat.send", { sessionKey, message: text, timeoutSeconds: 20 });
  expect(r.ok, JSON.stringify(r.error)).toBe(true);
  const run = await t.rpc("runs.get", { runId: r.result.runId });
  return { sessionKey, sent: r.result, run: run.result };
}

describe("failover, openai primary → anthropic fallback (local queue)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(config());
  });
  afterAll(async () => t.stop());

  /** The primary fails with `replies`; the fallback answers; the records name both. */
  async function fallsBack(replies: FakeChatReply[], cls: string, primaryCalls = 1) {
    oa.enqueue(...replies);
    an.enqueue({ text: "from claude" });
    const oaBefore = oa.chatRequests().length;
    const anBefore = an.requests.length;
    const { sessionKey, sent, run } = await send(t);
    expect(sent).toMatchObject({ status: "ok", reply: "from claude" });
    expect(run.model).toBe("an/claude");
    expect(run.fallbacks).toEqual([{ model: "oa/gpt", class: cls }]);
    expect(oa.chatRequests().length - oaBefore).toBe(primaryCalls);
    expect(an.requests.length - anBefore).toBe(1);
    const [line] = await assistantLines(t, sessionKey);
    expect(line?.usage?.model).toBe("an/claude");
    expect(line?.model).toBe("an/claude");
    return { sessionKey, run };
  }

  it("rate_limited: a retry-after longer than maxRetryAfterMs moves on at once", async () => {
    const t0 = Date.now();
    await fallsBack([{ status: 429, headers: { "retry-after": "30" } }], "rate_limited");
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  it("rate_limited: a short retry-after is waited out on the same model first", async () => {
    oa.enqueue({ status: 429, headers: { "retry-after-ms": "150" } }, { text: "from gpt" });
    const before = oa.chatRequests().length;
    const t0 = Date.now();
    const { sent, run } = await send(t);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    expect(sent).toMatchObject({ status: "ok", reply: "from gpt" });
    expect(run.model).toBe("oa/gpt");
    expect(run.fallbacks).toBeUndefined();
    expect(oa.chatRequests().length - before).toBe(2);
  });

  it("overloaded: 529 and 503 move on without a retry", async () => {
    await fallsBack([{ status: 529 }], "overloaded");
    await fallsBack([{ status: 503 }], "overloaded");
  });

  it("server: one quick retry on the same model, then the next", async () => {
    await fallsBack([{ status: 500 }, { status: 502 }], "server", 2);
    oa.enqueue({ status: 500 }, { text: "second try" });
    const { sent, run } = await send(t);
    expect(sent.reply).toBe("second try");
    expect(run.model).toBe("oa/gpt");
  });

  it("timeout: a model that does not answer within timeoutMs", async () => {
    await fallsBack([{ delayMs: 3000, text: "late" }], "timeout");
  });

  it("connection: a dropped connection", async () => {
    await fallsBack([{ drop: true }], "connection");
  });

  it("empty: a 200 with no content and no tool call (the turn no longer ends with nothing)", async () => {
    await fallsBack([{ text: "" }], "empty");
  });

  it("auth: 401 and 403", async () => {
    await fallsBack([{ status: 401 }], "auth");
    await fallsBack([{ status: 403 }], "auth");
  });

  it("billing: 402, and OpenAI's 429 insufficient_quota", async () => {
    await fallsBack([{ status: 402 }], "billing");
    await fallsBack([{ status: 429, errorCode: "insufficient_quota" }], "billing");
  });

  it("garbage: a 200 with an HTML page or JSON of another shape is classified, never a crash", async () => {
    const html = { raw: { body: "<html><body>502 Bad Gateway</body></html>" } };
    await fallsBack([html, html], "server", 2);
    const odd = { raw: { contentType: "application/json", body: '{"hello":"world"}' } };
    await fallsBack([odd, odd], "server", 2);
  });

  it("invalid_request: 400 fails the run naming the class; no other model is asked", async () => {
    oa.enqueue({ status: 400, error: "context too long" });
    const anBefore = an.requests.length;
    const { sent, run } = await send(t);
    expect(sent.status).toBe("error");
    expect(run.error).toMatch(/invalid_request/);
    expect(an.requests.length).toBe(anBefore);
  });

  it("every model failing ends the run naming each model and class", async () => {
    oa.enqueue({ status: 529 });
    an.enqueue({ status: 529 });
    const { sent, run } = await send(t);
    expect(sent.status).toBe("error");
    expect(run.error).toMatch(/oa\/gpt \(overloaded\).*an\/claude \(overloaded\)/);
    expect(run.fallbacks).toEqual([
      { model: "oa/gpt", class: "overloaded" },
      { model: "an/claude", class: "overloaded" },
    ]);
  });

  it("emits run.fallback and shows the last model in /status-style session_status", async () => {
    const events: Array<Record<string, unknown>> = [];
    const off = t.app.services.bus.on("run.fallback", (e) => events.push(e));
    const { sessionKey, run } = await fallsBack([{ status: 529 }], "overloaded");
    off();
    expect(events).toEqual([
      { runId: run.runId, sessionKey, model: "oa/gpt", class: "overloaded", next: "an/claude" },
    ]);
    const status = await t.invoke(sessionKey, "session_status", {});
    expect(JSON.stringify(status)).toContain("an/claude");
  });

  describe("streamed replies", () => {
    /** Deltas as a chat's preview sees them: a reset starts the reply over. */
    function watchDeltas() {
      let shown = "";
      let resets = 0;
      const off = t.app.services.bus.on("run.delta", (d) => {
        if (d.reset) {
          shown = "";
          resets++;
        } else shown += d.text;
      });
      return { off, view: () => ({ shown, resets }) };
    }

    it("a stream that breaks after its first delta is taken back: the chat sees one reply", async () => {
      const w = watchDeltas();
      await fallsBack([{ text: "half of an answer that never ends", dropAfterEvents: 3 }], "connection");
      w.off();
      expect(w.view()).toEqual({ shown: "from claude", resets: 1 });
    });

    it("a truncated stream (ended without a finish) and a mid-stream error event are classified", async () => {
      const w = watchDeltas();
      await fallsBack([{ text: "cut short here", truncateAfterEvents: 2 }], "connection");
      const broken = { text: "one two three", errorEvent: { afterEvents: 2, type: "server_error" } };
      await fallsBack([broken, broken], "server", 2);
      w.off();
      expect(w.view().shown).toBe("from claude");
    });
  });
});

describe("failover, anthropic primary → openai fallback", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(config({}, "an/claude", ["oa/gpt"]));
  });
  afterAll(async () => t.stop());

  async function fallsBack(replies: FakeAnthropicReply[], cls: string, primaryCalls = 1, stream = false) {
    an.enqueue(...replies);
    oa.enqueue({ text: "from gpt" });
    const before = an.requests.length;
    const off = stream ? t.app.services.bus.on("run.delta", () => {}) : () => {};
    const { sent, run } = await send(t);
    off();
    expect(sent).toMatchObject({ status: "ok", reply: "from gpt" });
    expect(run).toMatchObject({ model: "oa/gpt", fallbacks: [{ model: "an/claude", class: cls }] });
    expect(an.requests.length - before).toBe(primaryCalls);
  }

  it("529 overloaded_error, 402 billing_error, 401, 429 with a long retry-after", async () => {
    await fallsBack([{ status: 529 }], "overloaded");
    await fallsBack([{ status: 402 }], "billing");
    await fallsBack([{ status: 401 }], "auth");
    await fallsBack([{ status: 429, headers: { "retry-after": "60" } }], "rate_limited");
  });

  it("an overloaded_error event mid-stream (no status) is overloaded", async () => {
    await fallsBack(
      [{ text: "streaming text", errorEvent: { afterChunks: 1, type: "overloaded_error" } }],
      "overloaded",
      1,
      true,
    );
  });

  it("a truncated stream, an HTML page and an empty message are classified", async () => {
    await fallsBack([{ text: "never finished", truncateAfterChunks: 1 }], "connection", 1, true);
    const html = { raw: { body: "<html>oops</html>" } };
    await fallsBack([html, html], "server", 2);
    await fallsBack([{ text: "" }], "empty");
  });
});

describe("circuit breaker (local)", () => {
  let t: TestApp;
  let clock = Date.now();
  beforeAll(async () => {
    t = await startTestApp(config({ failuresToOpen: 2, cooldownSeconds: 30 }), { now: () => clock });
  });
  afterAll(async () => t.stop());

  it("opens after failuresToOpen failures, skips the model while open, lets one probe through after the cooldown", async () => {
    for (let i = 0; i < 2; i++) {
      oa.enqueue({ status: 529 });
      an.enqueue({ text: "fallback" });
      expect((await send(t)).run.fallbacks).toEqual([{ model: "oa/gpt", class: "overloaded" }]);
    }
    const health = await t.rpc("health");
    expect(health.result.models["oa/gpt"]).toMatchObject({
      state: "open",
      failures: 2,
      lastClass: "overloaded",
    });
    expect(health.result.models["an/claude"]).toMatchObject({ state: "closed" });

    // open: the primary is not called at all
    const before = oa.chatRequests().length;
    an.enqueue({ text: "fallback" });
    const skipped = await send(t);
    expect(oa.chatRequests().length).toBe(before);
    expect(skipped.run.fallbacks).toEqual([{ model: "oa/gpt", class: "overloaded", skipped: true }]);

    // half-open after the cooldown: one probe; it fails → open again
    clock += 31_000;
    expect((await t.rpc("health")).result.models["oa/gpt"].state).toBe("half_open");
    oa.enqueue({ status: 529 });
    an.enqueue({ text: "fallback" });
    await send(t);
    expect(oa.chatRequests().length).toBe(before + 1);
    expect((await t.rpc("health")).result.models["oa/gpt"].state).toBe("open");

    // the next probe succeeds → closed
    clock += 31_000;
    oa.enqueue({ text: "primary again" });
    const back = await send(t);
    expect(back.sent.reply).toBe("primary again");
    expect((await t.rpc("health")).result.models["oa/gpt"]).toMatchObject({ state: "closed", failures: 0 });
  });
});

describe("chain config is checked at start", () => {
  it("an unknown provider in a fallback names its path", async () => {
    await expect(
      startTestApp({
        ...config(),
        agents: { list: [{ id: "main", model: { primary: "oa/gpt", fallbacks: ["nope/x"] } }] },
      }),
    ).rejects.toThrow(/agents\.list\.0\.model\.fallbacks\.0: unknown model provider "nope"/);
    await expect(startTestApp(config({}, "oa/gpt", ["ghost/m"]))).rejects.toThrow(/models\.fallbacks\.0/);
  });

  it("a fallback outside models.allowed names its path", async () => {
    const c = config();
    await expect(
      startTestApp({ models: { ...c.models, allowed: ["oa/*"] } as ConfigInput["models"] }),
    ).rejects.toThrow(/models\.fallbacks\.0: model "an\/claude" is not allowed/);
  });

  it("an agent's own chain replaces the global fallbacks", async () => {
    const t = await startTestApp({
      ...config(),
      agents: { list: [{ id: "main", model: { primary: "an/claude", fallbacks: ["oa/gpt"] } }] },
    });
    try {
      an.enqueue({ status: 529 });
      oa.enqueue({ text: "agent chain" });
      const { sent, run } = await send(t);
      expect(sent.reply).toBe("agent chain");
      expect(run.fallbacks).toEqual([{ model: "an/claude", class: "overloaded" }]);
      const agents = await t.rpc("agents.list");
      expect(agents.result.agents[0].model).toBe("an/claude");
    } finally {
      await t.stop();
    }
  });
});
