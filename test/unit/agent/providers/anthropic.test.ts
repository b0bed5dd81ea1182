import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type AnthropicProviderConfig,
  createAnthropicProvider,
  toAnthropicMessages,
} from "../../../../src/agent/providers/anthropic.js";
import { RateLimitedError, type SwitchboardError } from "../../../../src/errors.js";
import { silentLogger } from "../../../../src/log.js";
import type { ModelRequest, ToolSpec } from "../../../../src/services/models.js";
import { type AnthropicFake, startAnthropicFake } from "../../../fakes/anthropic.js";

const KEY = "sk-ant-test-SECRETKEY-987654";

let fake: AnthropicFake;
beforeEach(async () => {
  fake = await startAnthropicFake();
});
afterEach(async () => {
  await fake.close();
});

function cfg(over: Partial<AnthropicProviderConfig> = {}): AnthropicProviderConfig {
  return {
    kind: "anthropic",
    baseUrl: fake.url,
    apiKey: KEY,
    models: {},
    timeoutMs: 5000,
    maxRetries: 2,
    ...over,
  };
}

function request(over: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: "claude-test",
    system: "Be brief.",
    messages: [{ role: "user", content: "hello" }],
    tools: [],
    ...over,
  };
}

const spawnTool: ToolSpec = {
  name: "sessions_spawn",
  description: "Spawn a sub-agent",
  parameters: { type: "object", properties: { task: { type: "string" } }, required: ["task"] },
};

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected the promise to reject");
}

describe("anthropic provider", () => {
  it("sends system, key and default max_tokens; returns text and usage with cache tokens", async () => {
    fake.enqueue({
      text: "hi!",
      usage: { input: 30, output: 2, cacheRead: 100, cacheWrite: 7 },
      model: "claude-test-v2",
    });
    const deltas: string[] = [];
    const r = await createAnthropicProvider("claude", cfg(), silentLogger()).complete(
      request({ onTextDelta: (d) => deltas.push(d) }),
    );
    expect(r).toEqual({
      text: "hi!",
      toolCalls: [],
      stopReason: "stop",
      model: "claude-test-v2",
      usage: { input: 30, output: 2, cacheRead: 100, cacheWrite: 7 },
    });
    expect(deltas).toEqual(["hi!"]);
    const sent = fake.requests[0]!;
    expect(sent.path).toBe("/v1/messages");
    // SDK 1.x sends the key as a bearer token (0.x used x-api-key).
    expect(sent.headers["x-api-key"] ?? sent.headers.authorization).toContain(KEY);
    expect(sent.body).toMatchObject({
      model: "claude-test",
      max_tokens: 4096,
      system: "Be brief.",
      messages: [{ role: "user", content: [{ type: "text", text: "hello" }] }],
    });
    expect("tools" in sent.body).toBe(false);
  });

  it("takes max_tokens from the request, then from per-model config", async () => {
    const p = createAnthropicProvider(
      "claude",
      cfg({ models: { "claude-test": { maxOutputTokens: 1234 } } }),
      silentLogger(),
    );
    await p.complete(request());
    await p.complete(request({ maxOutputTokens: 55 }));
    expect(fake.requests.map((r) => r.body.max_tokens)).toEqual([1234, 55]);
  });

  it("round-trips tool_use and tool_result blocks", async () => {
    fake.enqueue(
      {
        text: "Let me do both.",
        toolUses: [
          { id: "toolu_1", name: "sessions_spawn", input: { task: "research" } },
          { id: "toolu_2", name: "sessions_spawn", input: { task: "write" } },
        ],
      },
      { text: "Both spawned." },
    );
    const p = createAnthropicProvider("claude", cfg(), silentLogger());
    const first = await p.complete(request({ tools: [spawnTool] }));
    expect(first.stopReason).toBe("tool_calls");
    expect(first.text).toBe("Let me do both.");
    expect(first.toolCalls).toEqual([
      { id: "toolu_1", name: "sessions_spawn", arguments: '{"task":"research"}' },
      { id: "toolu_2", name: "sessions_spawn", arguments: '{"task":"write"}' },
    ]);
    expect(fake.requests[0]!.body.tools).toEqual([
      { name: "sessions_spawn", description: "Spawn a sub-agent", input_schema: spawnTool.parameters },
    ]);

    const second = await p.complete(
      request({
        tools: [spawnTool],
        messages: [
          { role: "user", content: "spawn two" },
          { role: "assistant", content: first.text, toolCalls: first.toolCalls },
          { role: "tool", toolCallId: "toolu_1", name: "sessions_spawn", content: '{"status":"accepted"}' },
          { role: "tool", toolCallId: "toolu_2", name: "sessions_spawn", content: '{"status":"accepted"}' },
        ],
      }),
    );
    expect(second).toMatchObject({ text: "Both spawned.", stopReason: "stop" });
    expect(fake.requests[1]!.body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "spawn two" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me do both." },
          { type: "tool_use", id: "toolu_1", name: "sessions_spawn", input: { task: "research" } },
          { type: "tool_use", id: "toolu_2", name: "sessions_spawn", input: { task: "write" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: '{"status":"accepted"}' },
          { type: "tool_result", tool_use_id: "toolu_2", content: '{"status":"accepted"}' },
        ],
      },
    ]);
  });

  it("keeps a turn valid when an assistant message is empty or arguments are not JSON", () => {
    expect(
      toAnthropicMessages([
        { role: "user", content: "" },
        { role: "assistant", content: "", toolCalls: [{ id: "t1", name: "x", arguments: "{oops" }] },
        { role: "tool", toolCallId: "t1", name: "x", content: "err" },
        { role: "user", content: "next" },
      ]),
    ).toEqual([
      { role: "user", content: [{ type: "text", text: "(empty)" }] },
      { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "x", input: { _raw: "{oops" } }] },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "t1", content: "err" },
          { type: "text", text: "next" },
        ],
      },
    ]);
  });

  it("retries 529 overloaded and 429 with retry-after, then succeeds", async () => {
    fake.enqueue({ status: 529 }, { status: 429, headers: { "retry-after": "1" } }, { text: "finally" });
    const delays: number[] = [];
    const p = createAnthropicProvider("claude", cfg(), silentLogger(), {
      sleep: async (ms) => void delays.push(ms),
      random: () => 0,
    });
    expect((await p.complete(request())).text).toBe("finally");
    expect(delays).toEqual([500, 1000]);
  });

  it("maps 401, 404 and exhausted 429 to coded errors without the key", async () => {
    fake.enqueue(
      { status: 401, error: `invalid x-api-key ${KEY}` },
      { status: 404, error: "model: claude-nope" },
    );
    const p = createAnthropicProvider("claude", cfg({ maxRetries: 0 }), silentLogger());
    const e401 = (await rejection(p.complete(request()))) as SwitchboardError;
    expect(e401.code).toBe("UNAUTHORIZED");
    expect(e401.message).toContain("models.providers.claude.apiKey");
    expect(e401.message).not.toContain("SECRETKEY");
    const e404 = (await rejection(p.complete(request({ model: "claude-nope" })))) as SwitchboardError;
    expect(e404.code).toBe("NOT_FOUND");
    expect(e404.message).toContain('model "claude-nope"');
    fake.enqueue({ status: 429, headers: { "retry-after": "7" } });
    const e429 = await rejection(p.complete(request()));
    expect(e429).toBeInstanceOf(RateLimitedError);
    expect((e429 as RateLimitedError).retryAfterMs).toBe(7000);
  });

  it("rejects with the caller's abort reason", async () => {
    fake.enqueue({ text: "late", delayMs: 30_000 });
    const controller = new AbortController();
    const pending = createAnthropicProvider("claude", cfg(), silentLogger()).complete(
      request({ signal: controller.signal }),
    );
    const reason = new Error("stop");
    await fake.waitForRequests(1);
    controller.abort(reason);
    expect(await rejection(pending)).toBe(reason);
  });

  it("refuses to start without an apiKey, naming the config path", () => {
    expect(() => createAnthropicProvider("claude", cfg({ apiKey: undefined }), silentLogger())).toThrow(
      /models\.providers\.claude\.apiKey/,
    );
  });

  it("ping lists models", async () => {
    const r = await createAnthropicProvider("claude", cfg(), silentLogger()).ping!();
    expect(r.ok).toBe(true);
    expect(fake.requests.at(-1)?.path).toBe("/v1/models");
  });
});
