import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAnthropicProvider } from "../../../../src/agent/providers/anthropic.js";
import { createOpenAIProvider } from "../../../../src/agent/providers/openai.js";
import { SwitchboardError } from "../../../../src/errors.js";
import { silentLogger } from "../../../../src/log.js";
import type { ModelRequest } from "../../../../src/services/models.js";
import { type AnthropicFake, startAnthropicFake } from "../../../fakes/anthropic.js";
import { type OpenAIFake, startOpenAIFake } from "../../../fakes/openai.js";

/** Provider errors say what happened: dropped mid-reply, refused before answering, or the server's 4xx. */

const request = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  model: "m",
  system: "",
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  ...over,
});

async function rejection(p: Promise<unknown>): Promise<SwitchboardError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SwitchboardError);
    return err as SwitchboardError;
  }
  throw new Error("expected a rejection");
}

describe("openai failures", () => {
  let fake: OpenAIFake;
  beforeEach(async () => {
    fake = await startOpenAIFake();
  });
  afterEach(async () => {
    await fake.close();
  });
  const provider = () =>
    createOpenAIProvider(
      "oa",
      { kind: "openai", baseUrl: fake.url, models: {}, timeoutMs: 5000, maxRetries: 0 },
      silentLogger(),
    );

  it("a stream cut off after some text is 'dropped mid-reply', not 'unreachable'", async () => {
    fake.enqueue({ text: "one two three four five six", dropAfterEvents: 3 });
    const deltas: string[] = [];
    const err = await rejection(provider().complete(request({ onTextDelta: (d) => deltas.push(d) })));
    expect(deltas.join("")).toBe("one two ");
    expect(err.code).toBe("UNAVAILABLE");
    expect(err.message).toContain("dropped the connection mid-reply");
    expect(err.message).not.toContain("unreachable");
    expect(err.details?.failure).toBe("dropped");
  });

  it("a refused connection is 'unreachable'", async () => {
    const url = fake.url;
    await fake.close();
    const p = createOpenAIProvider(
      "oa",
      { kind: "openai", baseUrl: url, models: {}, timeoutMs: 5000, maxRetries: 0 },
      silentLogger(),
    );
    const err = await rejection(p.complete(request({ onTextDelta: () => {} })));
    expect(err.message).toContain("unreachable");
    expect(err.details?.failure).toBe("unreachable");
    fake = await startOpenAIFake();
  });

  it("a 4xx carries the provider's own message", async () => {
    fake.enqueue({ status: 400, error: "context_length_exceeded: too long" });
    const err = await rejection(provider().complete(request({ onTextDelta: () => {} })));
    expect(err.code).toBe("INVALID_PARAMS");
    expect(err.message).toContain("HTTP 400");
    expect(err.message).toContain("context_length_exceeded: too long");
  });
});

describe("anthropic streams", () => {
  let fake: AnthropicFake;
  beforeEach(async () => {
    fake = await startAnthropicFake();
  });
  afterEach(async () => {
    await fake.close();
  });
  const provider = () =>
    createAnthropicProvider(
      "an",
      {
        kind: "anthropic",
        apiKey: "sk-ant-test",
        baseUrl: fake.url,
        models: {},
        timeoutMs: 5000,
        maxRetries: 0,
      },
      silentLogger(),
    );

  it("asks for a stream and delivers text deltas whose concatenation is the text", async () => {
    fake.enqueue({
      text: "Hello from a streamed Claude reply.",
      chunkChars: 5,
      usage: { input: 7, output: 9 },
    });
    const deltas: string[] = [];
    const res = await provider().complete(request({ onTextDelta: (d) => deltas.push(d) }));
    expect(fake.requests[0]?.body.stream).toBe(true);
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join("")).toBe("Hello from a streamed Claude reply.");
    expect(res.text).toBe("Hello from a streamed Claude reply.");
    expect(res.usage).toEqual({ input: 7, output: 9 });
    expect(res.stopReason).toBe("stop");
  });

  it("assembles tool input from input_json_delta fragments", async () => {
    fake.enqueue({
      text: "Looking.",
      toolUses: [{ id: "toolu_1", name: "sessions_list", input: { limit: 5, kinds: ["main"] } }],
    });
    const res = await provider().complete(request({ onTextDelta: () => {} }));
    expect(res.toolCalls).toEqual([
      { id: "toolu_1", name: "sessions_list", arguments: '{"limit":5,"kinds":["main"]}' },
    ]);
    expect(res.stopReason).toBe("tool_calls");
  });

  it("without a delta listener it does not stream", async () => {
    fake.enqueue({ text: "plain" });
    const res = await provider().complete(request());
    expect(fake.requests[0]?.body.stream).toBeFalsy();
    expect(res.text).toBe("plain");
  });

  it("a stream cut off mid-reply says so", async () => {
    fake.enqueue({ text: "abcdefghijklmnopqrstuvwxyz", chunkChars: 4, dropAfterChunks: 2 });
    const deltas: string[] = [];
    const err = await rejection(provider().complete(request({ onTextDelta: (d) => deltas.push(d) })));
    expect(deltas.join("")).toBe("abcdefgh");
    expect(err.message).toContain("dropped the connection mid-reply");
  });
});
