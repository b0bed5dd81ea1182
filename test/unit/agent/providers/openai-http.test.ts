import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createOpenAIProvider } from "../../../../src/agent/providers/openai.js";
import { chatBodyParts, sseData } from "../../../../src/agent/providers/openai-http.js";
import {
  openAIMessagesParts,
  type Piece,
  toOpenAIMessage,
} from "../../../../src/agent/providers/openai-map.js";
import { SwitchboardError } from "../../../../src/errors.js";
import { silentLogger } from "../../../../src/log.js";
import type { ModelMessage, ModelRequest, ToolSpec } from "../../../../src/services/models.js";
import { seededRandom } from "../../../helpers.js";

function parse(pieces: string[]): string[] {
  const out: string[] = [];
  const p = sseData((d) => out.push(d));
  for (const piece of pieces) p.feed(piece);
  p.end();
  return out;
}

describe("sseData", () => {
  it("splits events on blank lines, whatever the line ending and however the text is cut", () => {
    const body = 'data: {"a":1}\n\ndata: {"b":2}\r\n\r\ndata:{"c":3}\r\rdata: [DONE]\n\n';
    const whole = parse([body]);
    expect(whole).toEqual(['{"a":1}', '{"b":2}', '{"c":3}', "[DONE]"]);
    // every cut point, including between the CR and LF of a CRLF
    for (let i = 1; i < body.length; i++) expect(parse([body.slice(0, i), body.slice(i)])).toEqual(whole);
    expect(parse(body.split(""))).toEqual(whole);
  });

  it("joins multi-line data, skips comments and other fields, and keeps a last event without its blank line", () => {
    expect(parse([": keep-alive\n\nevent: x\nid: 7\ndata: one\ndata: two\n\nretry: 10\ndata: tail"])).toEqual(
      ["one\ntwo", "tail"],
    );
  });
});

/** A piece of a request without pictures: encoded JSON. */
const asBuffer = (p: Piece): Buffer => {
  if (!Buffer.isBuffer(p)) throw new Error("a picture where none was sent");
  return p;
};

/** The request body as one text: its pieces, as the socket gets them, put together. */
const chatBody = (req: ModelRequest, stream: boolean): string =>
  Buffer.concat(
    chatBodyParts(req, stream).map((p) => (typeof p === "string" ? Buffer.from(p) : asBuffer(p))),
  ).toString("utf8");

describe("chatBodyParts", () => {
  const tools: ToolSpec[] = [
    { name: "t1", description: "one", parameters: { type: "object", properties: { a: { type: "string" } } } },
  ];
  const req: ModelRequest = {
    model: "m",
    system: "sys",
    messages: [
      { role: "user", content: 'hi "there"\n' },
      { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "t1", arguments: '{"a":"x"}' }] },
      { role: "tool", toolCallId: "c1", name: "t1", content: "ok" },
    ],
    tools,
    maxOutputTokens: 5,
  };

  it("is the Chat Completions request the SDK would send, with tools from a cached serialisation", () => {
    const expected = {
      model: "m",
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: 'hi "there"\n' },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "t1", arguments: '{"a":"x"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: "ok" },
      ],
      tools: [
        { type: "function", function: { name: "t1", description: "one", parameters: tools[0]!.parameters } },
      ],
      max_tokens: 5,
    };
    expect(JSON.parse(chatBody(req, false))).toEqual(expected);
    expect(JSON.parse(chatBody(req, true))).toEqual({
      ...expected,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(JSON.parse(chatBody({ ...req, tools: [] }, false))).not.toHaveProperty("tools");
  });
});

describe("openAIMessagesParts", () => {
  /** The pieces put together: what the socket gets. */
  const openAIMessagesJson = (req: Pick<ModelRequest, "system" | "messages">): string =>
    Buffer.concat(openAIMessagesParts(req).map(asBuffer)).toString("utf8");

  /** What the messages' JSON must be: the whole array serialised at once. */
  const reference = (req: Pick<ModelRequest, "system" | "messages">): string =>
    JSON.stringify([
      ...(req.system ? [{ role: "system", content: req.system }] : []),
      ...req.messages.map(toOpenAIMessage),
    ]);

  it("equals serialising the whole array, for any mix of messages, however a session's requests change", () => {
    const rnd = seededRandom(4242);
    const texts = [
      "",
      "ping",
      'a "quoted"\n\\ line',
      "naïve ☃ 😀",
      "\ud800 lone",
      "\u2028\u0000",
      "x".repeat(300),
    ];
    const text = () => texts[Math.floor(rnd() * texts.length)] ?? "";
    const message = (j: number): ModelMessage => {
      const kind = Math.floor(rnd() * 4);
      if (kind === 0) return { role: "user", content: text() };
      if (kind === 1) return { role: "tool", toolCallId: `c${j}`, name: "t", content: text() };
      if (kind === 2) return { role: "assistant", content: text() };
      return {
        role: "assistant",
        content: text(),
        toolCalls: [{ id: `c${j}`, name: "t", arguments: text() }],
      };
    };
    for (let s = 0; s < 40; s++) {
      // one session: each request is the last one's messages plus new ones; sometimes a few
      // dropped at the start, one replaced, or one given a new content, tool calls or call id
      let messages: ModelMessage[] = [];
      for (let turn = 0; turn < 15; turn++) {
        messages = [...messages];
        const r = rnd();
        const at = Math.floor(rnd() * messages.length);
        const m = messages[at];
        if (r < 0.1) messages = messages.slice(1 + Math.floor(rnd() * 3));
        else if (r < 0.2 && m) messages[at] = message(turn);
        else if (r < 0.3 && m) m.content = text();
        else if (r < 0.35 && m?.role === "assistant")
          m.toolCalls = [{ id: "cx", name: "t", arguments: text() }];
        else if (r < 0.4 && m?.role === "tool") m.toolCallId = `other${turn}`;
        for (let k = Math.floor(rnd() * 4); k > 0; k--) messages.push(message(messages.length));
        const req = { system: rnd() < 0.2 ? "" : text(), messages };
        expect(openAIMessagesJson(req)).toBe(reference(req));
      }
    }
  });

  it("keeps a long session's JSON in a few encoded pieces, reused and cut without copying it whole", () => {
    const messages: ModelMessage[] = [];
    let most = 0;
    let last: Buffer[] = [];
    for (let turn = 0; turn < 1500; turn++) {
      messages.push(
        { role: "user", content: `question ${turn}` },
        { role: "assistant", content: `answer ${turn} ☃` },
      );
      last = openAIMessagesParts({ system: "sys", messages }).map(asBuffer);
      most = Math.max(most, last.length);
    }
    // 3,000 messages in 1,500 requests: geometric segments, not one piece per request
    expect(most).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(1500)) + 3);
    const req = { system: "sys", messages };
    expect(Buffer.concat(last).toString("utf8")).toBe(reference(req));
    // the newest message built again: everything before it is kept, the pieces are cut, not copied
    const before = last.slice(0, -1);
    const cut = [...messages.slice(0, -1), { ...messages[messages.length - 1]! }];
    const again = openAIMessagesParts({ system: "sys", messages: cut }).map(asBuffer);
    expect(Buffer.concat(again).toString("utf8")).toBe(reference({ system: "sys", messages: cut }));
    const oldest = before.slice(2).sort((a, b) => b.length - a.length)[0]!;
    expect(again).toContain(oldest);
  });

  it("reuses the JSON up to the first message built again (a window's newest unit is, once answered)", () => {
    const a: ModelMessage = { role: "user", content: "one" };
    const b: ModelMessage = { role: "assistant", content: "two" };
    const c: ModelMessage = { role: "user", content: "three" };
    openAIMessagesJson({ system: "", messages: [a, b, c] });
    const spy = vi.spyOn(JSON, "stringify");
    try {
      const next = {
        system: "",
        messages: [a, b, { ...c }, { role: "assistant", content: "four" } as ModelMessage],
      };
      const json = openAIMessagesJson(next);
      expect(spy).toHaveBeenCalledTimes(2); // the copy of `c` and the new message
      spy.mockRestore();
      expect(json).toBe(reference(next));
    } finally {
      spy.mockRestore();
    }
  });

  it("serialises only the messages the session's last request did not send, and all after a change", () => {
    const user: ModelMessage = { role: "user", content: "hi" };
    const assistant: ModelMessage = {
      role: "assistant",
      content: "",
      toolCalls: [{ id: "c1", name: "t", arguments: "{}" }],
    };
    const tool: ModelMessage = { role: "tool", toolCallId: "c1", name: "t", content: "ok" };
    const spy = vi.spyOn(JSON, "stringify");
    try {
      const first = { system: "sys", messages: [user, assistant, tool] };
      expect(openAIMessagesJson(first)).toBe(reference(first));
      spy.mockClear();
      const next = {
        system: "sys",
        messages: [user, assistant, tool, { role: "user", content: "again" } as ModelMessage],
      };
      const json = openAIMessagesJson(next);
      expect(spy).toHaveBeenCalledTimes(1); // the new message: the system prompt's JSON is kept
      const want = reference(next);
      spy.mockClear();
      user.content = "changed";
      const changed = openAIMessagesJson(next);
      expect(spy).toHaveBeenCalledTimes(5); // all again: the first message changed
      spy.mockRestore();
      expect(json).toBe(want);
      expect(changed).toBe(reference(next));
    } finally {
      spy.mockRestore();
    }
  });
});

describe("openai provider: stream events", () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
  });

  async function serve(sse: string): Promise<string> {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(sse);
      });
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`;
  }

  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", created: 0, model: "srv", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

  function provider(baseUrl: string) {
    return createOpenAIProvider(
      "oa",
      { kind: "openai", baseUrl, models: {}, timeoutMs: 5000, maxRetries: 0 },
      silentLogger(),
    );
  }

  it("sends the body in pieces that add up to its content-length, non-ASCII text and cached tools included", async () => {
    const got: Array<{ length: string | undefined; encoding: string | undefined; body: Buffer }> = [];
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        got.push({
          length: req.headers["content-length"],
          encoding: req.headers["transfer-encoding"],
          body: Buffer.concat(chunks),
        });
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(`${chunk({ role: "assistant", content: "ok" }, "stop")}data: [DONE]\n\n`);
      });
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`;
    const tools: ToolSpec[] = [
      { name: "t1", description: "ünïcode — tool", parameters: { type: "object", properties: {} } },
    ];
    const p = provider(url);
    for (const text of ["plain", "grüße 🌍 ".repeat(200), '"quoted"\n\u2028'])
      await p.complete({
        model: "m",
        system: "système",
        messages: [{ role: "user", content: text }],
        tools,
        onTextDelta: () => {},
      });
    expect(got).toHaveLength(3);
    for (const g of got) {
      expect(g.encoding).toBeUndefined();
      expect(Number(g.length)).toBe(g.body.length);
    }
    const second = JSON.parse(got[1]!.body.toString("utf8")) as {
      messages: Array<{ content: string }>;
      tools: Array<{ function: { description: string } }>;
      stream: boolean;
    };
    expect(second.messages.map((m) => m.content)).toEqual(["système", "grüße 🌍 ".repeat(200)]);
    expect(second.tools[0]!.function.description).toBe("ünïcode — tool");
    expect(second.stream).toBe(true);
  });

  it("an `error` object mid-stream fails the call with the server's message (HTTP 500 semantics)", async () => {
    const url = await serve(
      `${chunk({ role: "assistant", content: "par" })}data: {"error":{"message":"overloaded, try later"}}\n\n`,
    );
    const deltas: string[] = [];
    const err = await provider(url)
      .complete({
        model: "m",
        system: "",
        messages: [{ role: "user", content: "q" }],
        tools: [],
        onTextDelta: (d) => deltas.push(d),
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(deltas).toEqual(["par"]);
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("UNAVAILABLE");
    expect((err as SwitchboardError).message).toContain("overloaded, try later");
  });

  it("reads a CRLF stream cut into odd pieces, and a trailing slash on baseUrl is harmless", async () => {
    const url = await serve(
      `${chunk({ role: "assistant", content: "he" })}${chunk({ content: "llo" }, "stop")}data: [DONE]\n\n`.replace(
        /\n/g,
        "\r\n",
      ),
    );
    const deltas: string[] = [];
    const r = await provider(url).complete({
      model: "m",
      system: "",
      messages: [{ role: "user", content: "q" }],
      tools: [],
      onTextDelta: (d) => deltas.push(d),
    });
    expect(r.text).toBe("hello");
    expect(deltas).toEqual(["he", "llo"]);
    expect(r.model).toBe("srv");
    expect(r.stopReason).toBe("stop");
  });
});
