import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createOpenAIProvider, type OpenAIProviderConfig } from "../../../../src/agent/providers/openai.js";
import type { CallTuning } from "../../../../src/agent/providers/retry.js";
import { RateLimitedError, SwitchboardError } from "../../../../src/errors.js";
import { createLogger, silentLogger } from "../../../../src/log.js";
import { abortableSleep, type Sleep } from "../../../../src/retry/index.js";
import type { ModelRequest, ToolSpec } from "../../../../src/services/models.js";
import { type OpenAIFake, startOpenAIFake } from "../../../fakes/openai.js";

const KEY = "sk-test-SECRETKEY-0123456789";

let fake: OpenAIFake;
beforeEach(async () => {
  fake = await startOpenAIFake();
});
afterEach(async () => {
  await fake.close();
});

function cfg(over: Partial<OpenAIProviderConfig> = {}): OpenAIProviderConfig {
  return {
    kind: "openai",
    baseUrl: fake.url,
    apiKey: KEY,
    models: {},
    timeoutMs: 5000,
    maxRetries: 2,
    ...over,
  };
}

/** Records requested waits instead of sleeping, so retry tests are instant and exact. */
function recordingSleep(): CallTuning & { delays: number[] } {
  const delays: number[] = [];
  return { delays, sleep: async (ms) => void delays.push(ms), random: () => 0 };
}

function request(over: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: "gpt-test",
    system: "You are terse.",
    messages: [{ role: "user", content: "hi there" }],
    tools: [],
    ...over,
  };
}

const listTool: ToolSpec = {
  name: "sessions_list",
  description: "List sessions",
  parameters: { type: "object", properties: { limit: { type: "number" } } },
};
const historyTool: ToolSpec = {
  name: "sessions_history",
  description: "Read history",
  parameters: { type: "object", properties: { sessionKey: { type: "string" } }, required: ["sessionKey"] },
};

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected the promise to reject");
}

async function closedPortUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}/v1`;
}

describe("openai provider: requests and replies", () => {
  it("sends system, user, headers and key; returns text, usage and model", async () => {
    fake.enqueue({ text: "hello back", usage: { prompt: 12, completion: 3 }, model: "gpt-test-0001" });
    const p = createOpenAIProvider("oa", cfg({ headers: { "x-team": "blue" } }), silentLogger());
    const r = await p.complete(request({ maxOutputTokens: 77 }));
    expect(r).toMatchObject({
      text: "hello back",
      toolCalls: [],
      stopReason: "stop",
      model: "gpt-test-0001",
    });
    expect(r.usage).toEqual({ input: 12, output: 3 });
    const sent = fake.chatRequests()[0]!;
    expect(sent.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(sent.headers["x-team"]).toBe("blue");
    expect(sent.body.model).toBe("gpt-test");
    expect(sent.body.max_tokens).toBe(77);
    expect(sent.body.stream).toBeFalsy();
    expect(sent.body.messages).toEqual([
      { role: "system", content: "You are terse." },
      { role: "user", content: "hi there" },
    ]);
    expect("tools" in sent.body).toBe(false);
  });

  it("works without an apiKey (local servers) by sending a placeholder", async () => {
    const p = createOpenAIProvider("ollama", cfg({ apiKey: undefined }), silentLogger());
    const r = await p.complete(request({ messages: [{ role: "user", content: "ping" }] }));
    expect(r.text).toBe("ping");
    expect(fake.chatRequests()[0]!.headers.authorization).toBe("Bearer not-needed");
  });

  it("streams text deltas and reads usage from the final chunk", async () => {
    fake.enqueue({ text: "one two three four", usage: { prompt: 20, completion: 4, cached: 8 } });
    const p = createOpenAIProvider("oa", cfg(), silentLogger());
    const deltas: string[] = [];
    const r = await p.complete(request({ onTextDelta: (d) => deltas.push(d) }));
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("one two three four");
    expect(r.text).toBe("one two three four");
    expect(r.usage).toEqual({ input: 12, output: 4, cacheRead: 8 });
    const sent = fake.chatRequests()[0]!;
    expect(sent.body.stream).toBe(true);
    expect(sent.body.stream_options).toEqual({ include_usage: true });
  });

  it("does not fail when a streaming server reports no usage", async () => {
    fake.enqueue({ text: "no usage here", usage: null });
    const p = createOpenAIProvider("oa", cfg(), silentLogger());
    const r = await p.complete(request({ onTextDelta: () => {} }));
    expect(r.text).toBe("no usage here");
    expect(r.usage).toEqual({ input: 0, output: 0 });
  });

  it("reports cached prompt tokens apart from uncached input", async () => {
    fake.enqueue({ text: "ok", usage: { prompt: 100, completion: 5, cached: 40 } });
    const r = await createOpenAIProvider("oa", cfg(), silentLogger()).complete(request());
    expect(r.usage).toEqual({ input: 60, output: 5, cacheRead: 40 });
  });

  for (const streaming of [false, true]) {
    it(`maps parallel tool calls and sends results back (${streaming ? "streaming" : "non-streaming"})`, async () => {
      fake.enqueue(
        {
          toolCalls: [
            { id: "call_a", name: "sessions_list", arguments: { limit: 5 } },
            { id: "call_b", name: "sessions_history", arguments: { sessionKey: "agent:main:main" } },
          ],
        },
        { text: "two sessions" },
      );
      const p = createOpenAIProvider("oa", cfg(), silentLogger());
      const onTextDelta = streaming ? () => {} : undefined;
      const first = await p.complete(request({ tools: [listTool, historyTool], onTextDelta }));
      expect(first.stopReason).toBe("tool_calls");
      expect(first.toolCalls).toEqual([
        { id: "call_a", name: "sessions_list", arguments: '{"limit":5}' },
        { id: "call_b", name: "sessions_history", arguments: '{"sessionKey":"agent:main:main"}' },
      ]);
      expect(fake.chatRequests()[0]!.body.tools).toEqual([
        {
          type: "function",
          function: { name: "sessions_list", description: "List sessions", parameters: listTool.parameters },
        },
        {
          type: "function",
          function: {
            name: "sessions_history",
            description: "Read history",
            parameters: historyTool.parameters,
          },
        },
      ]);

      const second = await p.complete(
        request({
          tools: [listTool, historyTool],
          onTextDelta,
          messages: [
            { role: "user", content: "what is going on?" },
            { role: "assistant", content: "", toolCalls: first.toolCalls },
            { role: "tool", toolCallId: "call_a", name: "sessions_list", content: '{"sessions":[]}' },
            { role: "tool", toolCallId: "call_b", name: "sessions_history", content: '{"messages":[]}' },
          ],
        }),
      );
      expect(second).toMatchObject({ text: "two sessions", stopReason: "stop", toolCalls: [] });
      expect(fake.chatRequests()[1]!.body.messages!.slice(1)).toEqual([
        { role: "user", content: "what is going on?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_a", type: "function", function: { name: "sessions_list", arguments: '{"limit":5}' } },
            {
              id: "call_b",
              type: "function",
              function: { name: "sessions_history", arguments: '{"sessionKey":"agent:main:main"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_a", content: '{"sessions":[]}' },
        { role: "tool", tool_call_id: "call_b", content: '{"messages":[]}' },
      ]);
    });
  }

  it("ping lists models; an unreachable server is reported, not thrown", async () => {
    const ok = await createOpenAIProvider("oa", cfg(), silentLogger()).ping!();
    expect(ok.ok).toBe(true);
    expect(ok.message).toContain("1 model");
    expect(fake.requests.at(-1)).toMatchObject({ method: "GET", path: "/v1/models" });
    const down = await createOpenAIProvider("oa", cfg({ baseUrl: await closedPortUrl() }), silentLogger())
      .ping!();
    expect(down.ok).toBe(false);
    expect(down.message).toContain("unreachable");
  });
});

describe("openai provider: retries and failures", () => {
  it("waits the server's retry-after on 429, then succeeds", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after": "2" } }, { text: "after the wait" });
    const t = recordingSleep();
    const r = await createOpenAIProvider("oa", cfg(), silentLogger(), t).complete(request());
    expect(r.text).toBe("after the wait");
    expect(t.delays).toEqual([2000]);
    expect(fake.chatRequests()).toHaveLength(2);
  });

  it("really sleeps a short retry-after with the default sleep", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after": "0.05" } }, { text: "fine" });
    const started = performance.now();
    const r = await createOpenAIProvider("oa", cfg(), silentLogger()).complete(request());
    expect(r.text).toBe("fine");
    // A lower bound only: the SDK-independent sleep must not retry before the server's wait.
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
  });

  it("backs off exponentially on 500s and succeeds on a later attempt", async () => {
    fake.enqueue({ status: 500 }, { status: 503 }, { text: "recovered" });
    const t = recordingSleep();
    const r = await createOpenAIProvider("oa", cfg(), silentLogger(), t).complete(request());
    expect(r.text).toBe("recovered");
    expect(t.delays).toEqual([500, 1000]);
  });

  it("gives up after maxRetries with a RateLimitedError carrying retry-after", async () => {
    for (let i = 0; i < 3; i++) fake.enqueue({ status: 429, headers: { "retry-after": "3" } });
    const t = recordingSleep();
    const err = await rejection(
      createOpenAIProvider("oa", cfg({ maxRetries: 2 }), silentLogger(), t).complete(request()),
    );
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAfterMs).toBe(3000);
    expect(fake.chatRequests()).toHaveLength(3);
  });

  it("does not wait out a retry-after longer than the policy allows", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after": "3600" } }, { text: "never reached" });
    const t = recordingSleep();
    const err = await rejection(createOpenAIProvider("oa", cfg(), silentLogger(), t).complete(request()));
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAfterMs).toBe(3_600_000);
    expect(t.delays).toEqual([]);
    expect(fake.chatRequests()).toHaveLength(1);
  });

  it("maps 401 to UNAUTHORIZED naming the provider and apiKey, without retrying", async () => {
    await fake.close();
    fake = await startOpenAIFake({ apiKey: "the-right-key" });
    const t = recordingSleep();
    const err = await rejection(
      createOpenAIProvider("work-llm", cfg(), silentLogger(), t).complete(request()),
    );
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("UNAUTHORIZED");
    expect((err as Error).message).toContain('"work-llm"');
    expect((err as Error).message).toContain("models.providers.work-llm.apiKey");
    expect(fake.chatRequests()).toHaveLength(1);
  });

  it("maps 404 to NOT_FOUND naming the model", async () => {
    fake.enqueue({ status: 404, error: "The model `gpt-nope` does not exist" });
    const err = await rejection(
      createOpenAIProvider("oa", cfg(), silentLogger()).complete(request({ model: "gpt-nope" })),
    );
    expect((err as SwitchboardError).code).toBe("NOT_FOUND");
    expect((err as Error).message).toContain('model "gpt-nope"');
  });

  it("maps 400 to INVALID_PARAMS with the server's reason", async () => {
    fake.enqueue({ status: 400, error: "messages must not be empty" });
    const err = await rejection(createOpenAIProvider("oa", cfg(), silentLogger()).complete(request()));
    expect((err as SwitchboardError).code).toBe("INVALID_PARAMS");
    expect((err as Error).message).toContain("messages must not be empty");
  });

  it("maps an unreachable server to UNAVAILABLE naming baseUrl, after retrying", async () => {
    const url = await closedPortUrl();
    const t = recordingSleep();
    const err = await rejection(
      createOpenAIProvider("oa", cfg({ baseUrl: url }), silentLogger(), t).complete(request()),
    );
    expect((err as SwitchboardError).code).toBe("UNAVAILABLE");
    expect((err as Error).message).toContain(url);
    expect(t.delays).toHaveLength(2);
  });

  it("maps a dropped connection to UNAVAILABLE", async () => {
    fake.enqueue({ drop: true });
    const err = await rejection(
      createOpenAIProvider("oa", cfg({ maxRetries: 0 }), silentLogger()).complete(request()),
    );
    expect((err as SwitchboardError).code).toBe("UNAVAILABLE");
  });

  it("never puts the key or the Authorization header in an error", async () => {
    fake.enqueue((req) => ({ status: 500, error: `upstream saw ${req.headers.authorization} and ${KEY}` }));
    const err = await rejection(
      createOpenAIProvider("oa", cfg({ maxRetries: 0 }), silentLogger()).complete(request()),
    );
    expect((err as SwitchboardError).code).toBe("UNAVAILABLE");
    expect((err as Error).message).toContain("upstream saw");
    const visible = `${(err as Error).message} ${JSON.stringify((err as SwitchboardError).details)}`;
    expect(visible).not.toContain("SECRETKEY");

    const url = await closedPortUrl();
    const err2 = await rejection(
      createOpenAIProvider("oa", cfg({ baseUrl: url, maxRetries: 0 }), silentLogger()).complete(request()),
    );
    expect(`${(err2 as Error).message} ${JSON.stringify((err2 as SwitchboardError).details)}`).not.toContain(
      "SECRETKEY",
    );
  });

  it("keeps the key out of retry log lines", async () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: "trace",
      destination: { write: (l: string) => void lines.push(l) },
    });
    fake.enqueue((req) => ({ status: 503, error: `saw ${req.headers.authorization}` }), { text: "ok" });
    const t = recordingSleep();
    expect((await createOpenAIProvider("oa", cfg(), logger, t).complete(request())).text).toBe("ok");
    expect(lines.some((l) => l.includes("retrying") && l.includes("HTTP 503"))).toBe(true);
    expect(lines.join("\n")).not.toContain("SECRETKEY");
  });
});

describe("openai provider: abort and timeout", () => {
  it("rejects with the caller's abort reason while waiting for the server", async () => {
    fake.enqueue({ text: "too late", delayMs: 30_000 });
    const controller = new AbortController();
    const pending = createOpenAIProvider("oa", cfg(), silentLogger()).complete(
      request({ signal: controller.signal }),
    );
    await fake.waitForRequests(1);
    const reason = new Error("run cancelled");
    controller.abort(reason);
    expect(await rejection(pending)).toBe(reason);
    expect(fake.chatRequests()).toHaveLength(1);
  });

  it("stops a retry wait when the caller aborts", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after": "30" } });
    const controller = new AbortController();
    let waitStarted!: (ms: number) => void;
    const waiting = new Promise<number>((r) => {
      waitStarted = r;
    });
    const sleep: Sleep = (ms, signal) => {
      waitStarted(ms);
      return abortableSleep(ms, signal);
    };
    const pending = createOpenAIProvider("oa", cfg(), silentLogger(), { sleep }).complete(
      request({ signal: controller.signal }),
    );
    expect(await waiting).toBe(30_000);
    const reason = new Error("shutdown");
    controller.abort(reason);
    expect(await rejection(pending)).toBe(reason);
    expect(fake.chatRequests()).toHaveLength(1);
  });

  it("times out a silent server with TIMEOUT", async () => {
    fake.enqueue({ text: "too late", delayMs: 30_000 });
    const err = await rejection(
      createOpenAIProvider("oa", cfg({ timeoutMs: 100, maxRetries: 0 }), silentLogger()).complete(request()),
    );
    expect((err as SwitchboardError).code).toBe("TIMEOUT");
    expect((err as Error).message).toContain("models.providers.oa.timeoutMs");
  });

  it("times out a stalled stream and does not retry after text was delivered", async () => {
    fake.enqueue({ text: "first second third", stallAfterEvents: 2 });
    const deltas: string[] = [];
    const err = await rejection(
      createOpenAIProvider(
        "oa",
        cfg({ timeoutMs: 300, maxRetries: 2 }),
        silentLogger(),
        recordingSleep(),
      ).complete(request({ onTextDelta: (d) => deltas.push(d) })),
    );
    expect((err as SwitchboardError).code).toBe("TIMEOUT");
    expect(deltas).toEqual(["first "]);
    expect(fake.chatRequests()).toHaveLength(1);
  });
});
