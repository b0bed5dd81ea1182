import { describe, expect, it } from "vitest";
import {
  buildHistoryView,
  HISTORY_MAX_BYTES,
  HISTORY_TEXT_LIMIT_CHARS,
  MESSAGE_TOO_LARGE,
  maskSecret,
  redactSecrets,
  redactText,
  sanitizeText,
  stripAssistantScaffolding,
  TRUNCATION_MARKER,
} from "../../../src/history/index.js";
import type { TranscriptMessage } from "../../../src/store/types.js";

// Fake credentials assembled at runtime so no literal secret sits in the source.
const OPENAI = `sk-proj-${"A1b2C3d4E5".repeat(4)}`;
const TG = `123456789:${"AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw".slice(0, 35)}`;

describe("stripAssistantScaffolding", () => {
  it.each([
    ["think block", "<think>plan it</think>Answer", "Answer"],
    ["thinking block, multi-line", "<thinking>\nstep 1\nstep 2\n</thinking>\nAnswer", "Answer"],
    ["thinking tags are case-insensitive", "<THINK>x</Think>Answer", "Answer"],
    ["unterminated thinking", "Answer first.<thinking>and then it never closes", "Answer first."],
    ["orphan closing think swallows what came before", "reasoning text</think>Answer", "Answer"],
    ["relevant-memories", "<relevant-memories>\n- likes tea\n</relevant-memories>\nHello", "Hello"],
    ["relevant_memories", "<relevant_memories>x</relevant_memories>Hello", "Hello"],
    ["unterminated memories", "Hello<relevant-memories>leak", "Hello"],
    ["tool_call", 'Sure.<tool_call>{"name":"exec"}</tool_call> Done.', "Sure. Done."],
    ["tool_calls", "A<tool_calls><tool_call>1</tool_call></tool_calls>B", "AB"],
    ["function_call", "A<function_call>{}</function_call>B", "AB"],
    [
      "function_calls with invoke",
      'A<function_calls><invoke name="x"><parameter name="p">1</parameter></invoke></function_calls>B',
      "AB",
    ],
    ["invoke with attributes", 'A<invoke name="exec" id="1">ls</invoke>B', "AB"],
    ["unterminated tool_call", 'Let me check.\n<tool_call>{"name": "read"', "Let me check."],
    ["unterminated invoke", 'Ok <invoke name="x">', "Ok"],
    ["namespaced minimax tool call", "A<minimax:tool_call>x</minimax:tool_call>B", "AB"],
    ["orphan closing tool tag", "A</minimax:tool_call>B", "AB"],
    [
      "downgraded tool call + arguments",
      '[Tool Call: exec (ID: 1)]\nArguments: {"cmd":"ls"}\nHello',
      "Hello",
    ],
    ["downgraded tool result marker", "[Tool Result for ID 1]\nHello", "Hello"],
    ["historical context marker", "[Historical context: earlier turn]\nHello", "Hello"],
    ["ascii control token", "Hi<|im_end|> there", "Hi there"],
    ["several control tokens", "<|assistant|>Hi<|eot_id|>", "Hi"],
    ["full-width control token", "Hi<｜end▁of▁sentence｜> there", "Hi there"],
    ["blank lines collapse after removal", "A\n\n<think>x</think>\n\n\nB", "A\n\nB"],
    // Downgraded markers: the marker only, never the rest of its line.
    ["tool call marker mid-line", "A [Tool Call: foo(1)] B continues", "A B continues"],
    [
      "tool result marker keeps its line",
      "[Tool Result for ID 7] shows the files below",
      "shows the files below",
    ],
    [
      "historical context marker mid-line",
      "Earlier: [Historical context: turn 3] we agreed.",
      "Earlier: we agreed.",
    ],
    ["marker with nested brackets", "x [Tool Call: f([1, 2]) (ID: 9)] y", "x y"],
    [
      "multi-line JSON arguments go with their call marker",
      '[Tool Call: read (ID: toolu_1)]\nArguments: {"path":\n  "/tmp/x"}\nVisible',
      "Visible",
    ],
    // Tool-call XML: a closing tag inside a quoted JSON string does not end the block.
    [
      "closing tag inside a JSON string",
      'prefix\n<tool_call>\n{"name":"x","arguments":{"html":"<div></tool_call><span>leak</span>"}}\n</tool_call>\nsuffix',
      "prefix\n\nsuffix",
    ],
    [
      "closing tag inside a single-quoted payload string",
      "prefix\n<tool_call>\n{'html':'</tool_call> leak','tail':'still hidden'}\n</tool_call>\nsuffix",
      "prefix\n\nsuffix",
    ],
    [
      "a mismatched closing tag does not end the block",
      'Prefix\n<tool_call>{"name":"x"}</tool_result>LEAK</tool_call>\nSuffix',
      "Prefix\n\nSuffix",
    ],
    [
      "a malformed payload still closes at its own tag",
      'prefix\n<tool_call>\n{"name":"read",\n</function_calls>\nstill-hidden\n</tool_call>\nsuffix',
      "prefix\n\nsuffix",
    ],
    [
      "closed function_calls then an unclosed one: no orphan closing tag",
      'A<function_calls><invoke name="a"><parameter name="p">1</parameter></invoke></function_calls> B <function_calls>\n<invoke name="b">',
      "A B",
    ],
    [
      "tool_result block",
      'Prefix\n<tool_result> {"output": "file contents"} </tool_result>\nSuffix',
      "Prefix\n\nSuffix",
    ],
    ["unterminated tool_result with a payload", 'Result:\n<tool_result>\n{"output": "data"}\n', "Result:"],
    [
      "unterminated tool_call with an array payload",
      'prefix\n<function_calls id="x">[{"name":"find"}]',
      "prefix",
    ],
    [
      "Qwen-style nested function XML",
      "prefix\n<tool_call><function=read><parameter=path>/home/user</parameter></function></tool_call>\nsuffix",
      "prefix\n\nsuffix",
    ],
    ["dangling Qwen-style call", "prefix\n<tool_call><function=read><parameter=path>/home", "prefix"],
    ["dangling call with a parameter element", 'Calling:\n<tool_call>\n<parameter name="q">x', "Calling:"],
    [
      "a prose mention stays while a later real block goes",
      'Use <tool_call> to invoke tools.\n<tool_call>{"name":"find"}</tool_call>',
      "Use <tool_call> to invoke tools.",
    ],
    ["self-closing tool tag", "prefix <tool_call/> suffix", "prefix suffix"],
    ["self-closing tag with attributes", 'prefix <function_calls name="x"/> suffix', "prefix suffix"],
    ["lone closing tool tag", "prefix </tool_call> suffix", "prefix suffix"],
    [
      "control tokens mid-sentence",
      "Start <|tool_call_result_begin|>middle<|tool_call_result_end|> end",
      "Start middle end",
    ],
    [
      "every kind in one pass",
      '<invoke name="read">payload</invoke></minimax:tool_call>\n<tool_result>{"output":"hidden"}</tool_result>\n[Tool Call: read (ID: toolu_1)]\nArguments: {"path":"/tmp/x"}\n<think>secret</think>\nVisible answer',
      "Visible answer",
    ],
  ])("%s", (_name, input, expected) => {
    expect(stripAssistantScaffolding(input)).toEqual({ text: expected, stripped: true });
  });

  it.each([
    ["plain text", "Hello, world."],
    ["comparisons", "a < b and c > d | e"],
    ["look-alike tags", "<thinker> and <invoker> and <tool_caller>"],
    ["fenced code", "Example:\n```xml\n<think>x</think>\n<tool_call>{}</tool_call>\n```\nend"],
    ["tilde fence", "~~~\n<|im_end|>\n[Tool Call: x]\n~~~"],
    ["unterminated fence runs to the end", "See:\n```\n<think>still code"],
    ["inline code", "Use `<think>` and `<|im_end|>` and ``<tool_call> ` ``"],
    ["brackets that are not markers", "[Tooling] and [tool call] notes"],
    ["a bare tool_call tag in prose", "Use <tool_call> to invoke tools."],
    ["a tool_call tag followed by other markup", "Use <tool_call><arg> literally."],
    ["a bare tool_result tag in prose", "The <tool_result> element wraps output."],
    [
      "a tag name that only shares the prefix",
      'prefix <tool_call-example>{"name":"read"}</tool_call-example> suffix',
    ],
    ["an unclosed marker bracket", "[Tool Call: it never closes"],
    ["a tag split over lines is not a tag", "Use <tool_call\nto call."],
    ["tool_call in inline code", "Use `<tool_call>{}</tool_call>` to invoke tools."],
    ["tool XML in a fence", '```xml\n<tool_call> {"name": "find"} </tool_call>\n```\n\nVisible text'],
  ])("leaves %s untouched", (_name, input) => {
    expect(stripAssistantScaffolding(input)).toEqual({ text: input, stripped: false });
  });

  it("strips around code but keeps the code byte-for-byte", () => {
    const code = "```ts\nconst x = `<think>`; // <|x|>\n```";
    const r = stripAssistantScaffolding(`<think>hidden</think>Here:\n${code}\n<|im_end|>`);
    expect(r.text).toBe(`Here:\n${code}`);
  });

  it("a stripped block takes code inside it along", () => {
    expect(stripAssistantScaffolding("<think>\n```\nsecret plan\n```\n</think>Answer").text).toBe("Answer");
  });

  it("does not confuse placeholders with text that looks like them", () => {
    const input = "x \uE000c0\uE001 `code` <think>y</think>";
    expect(stripAssistantScaffolding(input).text).toBe("x \uE000c0\uE001 `code`");
  });
});

describe("redactText: credential forms", () => {
  it.each([
    ["OpenAI key", `key ${OPENAI} end`, `key ${OPENAI.slice(0, 6)}…${OPENAI.slice(-4)} end`],
    ["Anthropic key", "sk-ant-api03-abcdefghijklmnop1234", "sk-ant…1234"],
    ["short sk- key", "sk-abcdef123456", "***"],
    ["GitHub classic token", `ghp_${"a1B2".repeat(9)}`, "ghp_a1…a1B2"],
    ["GitHub fine-grained token", `github_pat_11${"ABCDE12345".repeat(3)}`, "github…2345"],
    ["Slack bot token", "xoxb-1234567890-abcdefghijkl", "xoxb-1…ijkl"],
    ["Slack user token", "xoxp-1234567890-abcdefghijkl", "xoxp-1…ijkl"],
    ["Slack app token", "xapp-1-A0123-456789abcdef", "xapp-1…cdef"],
    ["Google API key", `AIza${"Sy0123456789".repeat(3)}`, "AIzaSy…6789"],
    [
      "Bearer header",
      "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig123",
      "Authorization: Bearer eyJhbG…g123",
    ],
    ["short bearer token", "Bearer abc12345", "Bearer ***"],
    ["short bearer token in a header", "Authorization: Bearer abc123", "Authorization: Bearer ***"],
    [
      "letters-only bearer token in a header",
      "authorization: bearer abcdefghij",
      "authorization: bearer ***",
    ],
    ["quoted header", '{"Authorization": "Bearer hunter2"}', '{"Authorization": "Bearer ***"}'],
    ["short bearer token with digits in prose", "use Bearer abc123 for it", "use Bearer *** for it"],
    ["Telegram bot token", `bot${"x"} ${TG} ok`, `botx ${TG.slice(0, 6)}…${TG.slice(-4)} ok`],
    [
      "PEM private key",
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----",
      "-----BEGIN RSA PRIVATE KEY-----\n…redacted…\n-----END RSA PRIVATE KEY-----",
    ],
    [
      "PEM without END (cut off)",
      "key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
      "key:\n-----BEGIN PRIVATE KEY-----\n…redacted…\n-----END PRIVATE KEY-----",
    ],
    ["env _KEY assignment, long", "OPENAI_API_KEY=abcdefghijklmnopqrstu", "OPENAI_API_KEY=abcdef…rstu"],
    ["env _TOKEN assignment", "GITHUB_TOKEN=abc123", "GITHUB_TOKEN=***"],
    ["env _SECRET assignment", "export CLIENT_SECRET=s3cr3t", "export CLIENT_SECRET=***"],
    ["env _PASSWORD assignment", "DB_PASSWORD=hunter2 next", "DB_PASSWORD=*** next"],
    ["quoted assignment", 'API_KEY="hunter2"', 'API_KEY="***"'],
    ["query-string key", "https://x.test/v1?key=abc123&alt=json", "https://x.test/v1?key=***&alt=json"],
    ["JSON apiKey", '{"apiKey": "abcdefghijklmnopqrstuvwxyz"}', '{"apiKey": "abcdef…wxyz"}'],
    ["JSON token", '{"token":"short"}', '{"token":"***"}'],
    ["JSON password", '{"password": "pw"}', '{"password": "***"}'],
    [
      "JSON accessToken / refreshToken",
      '{"accessToken":"a1","refreshToken":"r1"}',
      '{"accessToken":"***","refreshToken":"***"}',
    ],
    ["JSON secret", "{'secret': 'x'}", "{'secret': '***'}"],
    ["CLI --token", "tool --token abc123 run", "tool --token *** run"],
    ["CLI --api-key=", "tool --api-key=abcdefghijklmnopqrstuv", "tool --api-key=abcdef…stuv"],
    ["URL credentials", "postgres://admin:hunter2@db:5432/app", "postgres://admin:***@db:5432/app"],
    [
      "URL credentials without a user name",
      "redis://:hunter2@127.0.0.1:6379/0 and rediss://:correcthorsebatterystaple@cache:6380",
      "redis://:***@127.0.0.1:6379/0 and rediss://:correc…aple@cache:6380",
    ],
  ])("%s", (_name, input, expected) => {
    expect(redactText(input)).toEqual({ text: expected, redacted: true });
  });

  it.each([
    ["plain prose", "The weather is nice."],
    ["scikit-learn", "I use sk-learn daily"],
    ["Bearer as a word", "Bearer tokens are common"],
    ["token counts", '{"maxTokens": "5", "totalTokens": 10, "tokens": "many"}'],
    ["empty and null JSON values", '{"token": "", "password": null}'],
    ["placeholders", `API_KEY=${"$"}{OPENAI_API_KEY} and TOKEN=***`],
    ["public keys", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"],
    ["words ending in key", "monkey=banana turkey=1"],
    ["session keys", "sessionKey=agent:main:main"],
    ["times and ids", "at 12:30:45, chat -1001234567890, ts 1712345678.000100"],
  ])("leaves %s alone", (_name, input) => {
    expect(redactText(input)).toEqual({ text: input, redacted: false });
  });

  it("is idempotent: redacting redacted text changes nothing", () => {
    const input = `a ${OPENAI} b OPENAI_API_KEY=${OPENAI} {"token":"t"} Bearer ${"x1".repeat(12)} ${TG}`;
    const once = redactText(input);
    expect(once.redacted).toBe(true);
    expect(redactText(once.text)).toEqual({ text: once.text, redacted: false });
  });

  it("redactSecrets returns the masked string", () => {
    expect(redactSecrets(`token ${OPENAI}`)).toBe(`token ${maskSecret(OPENAI)}`);
    expect(redactSecrets(`token ${OPENAI}`)).not.toContain(OPENAI.slice(6, -4));
  });

  it.each([
    ["", "***"],
    ["a".repeat(17), "***"],
    ["abcdefghijklmnopqr", "abcdef…opqr"],
    ["😀😀😀😀😀😀xxxxxxxx😀😀😀😀", "😀😀😀😀😀😀…😀😀😀😀"],
  ])("maskSecret(%j) = %j", (input, out) => {
    expect(maskSecret(input)).toBe(out);
  });
});

describe("sanitizeText", () => {
  it("strips, then redacts (inside code too), and reports each", () => {
    const r = sanitizeText(`<think>x</think>Here:\n\`\`\`\nAPI_KEY=${OPENAI}\n\`\`\``);
    expect(r).toEqual({
      text: `Here:\n\`\`\`\nAPI_KEY=${maskSecret(OPENAI)}\n\`\`\``,
      redacted: true,
      truncated: false,
      stripped: true,
    });
  });

  it("strip: false only redacts", () => {
    expect(sanitizeText("<think>kept</think> GITHUB_TOKEN=x", { strip: false })).toEqual({
      text: "<think>kept</think> GITHUB_TOKEN=***",
      redacted: true,
      truncated: false,
      stripped: false,
    });
  });

  it.each([
    [0, false],
    [1, false],
    [HISTORY_TEXT_LIMIT_CHARS - 1, false],
    [HISTORY_TEXT_LIMIT_CHARS, false],
    [HISTORY_TEXT_LIMIT_CHARS + 1, true],
    [HISTORY_TEXT_LIMIT_CHARS * 3, true],
    [200_000, true],
  ])("length %i → truncated %s, never longer than the limit", (n, truncated) => {
    const r = sanitizeText("a".repeat(n));
    expect(r.truncated).toBe(truncated);
    expect(r.text.length).toBe(Math.min(n, HISTORY_TEXT_LIMIT_CHARS));
    expect(r.text.endsWith(TRUNCATION_MARKER)).toBe(truncated);
  });

  it("never cuts a surrogate pair in half", () => {
    const cut = HISTORY_TEXT_LIMIT_CHARS - TRUNCATION_MARKER.length;
    const r = sanitizeText(`${"a".repeat(cut - 1)}😀${"b".repeat(100)}`);
    expect(r.text).toBe(`${"a".repeat(cut - 1)}${TRUNCATION_MARKER}`);
  });

  it("redacts before cutting, so a secret at the boundary does not leak", () => {
    const r = sanitizeText(`${"a".repeat(HISTORY_TEXT_LIMIT_CHARS - 20)} ${OPENAI} tail`);
    expect(r.redacted).toBe(true);
    expect(r.text).not.toContain(OPENAI.slice(6, 16));
  });
});

// ─── buildHistoryView ────────────────────────────────────────────────────────────────────────

let seq = 0;
function msg(
  role: TranscriptMessage["role"],
  content: unknown,
  extra: Partial<TranscriptMessage> = {},
): TranscriptMessage {
  seq++;
  return { id: `m${seq}`, sessionId: "s1", role, content, timestamp: 1000 + seq, ...extra };
}

describe("buildHistoryView: content", () => {
  it("drops tool messages unless includeTools", () => {
    const msgs = [
      msg("user", "hi"),
      msg("toolCall", { name: "exec", arguments: { cmd: "ls" } }, { toolCallId: "t1", toolName: "exec" }),
      msg("toolResult", "files", { toolCallId: "t1", toolName: "exec" }),
      msg("assistant", "done"),
    ];
    expect(buildHistoryView(msgs, { includeTools: false }).messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
    ]);
    const withTools = buildHistoryView(msgs, { includeTools: true }).messages;
    expect(withTools.map((m) => m.role)).toEqual(["user", "toolCall", "toolResult", "assistant"]);
    expect(withTools[1]).toMatchObject({
      toolCallId: "t1",
      toolName: "exec",
      content: { arguments: { cmd: "ls" } },
    });
  });

  it("drops usage, cost, sessionId, runId and provider internals", () => {
    const m = msg(
      "assistant",
      [
        { type: "text", text: "hello", providerData: { x: 1 } },
        { type: "thinking", thinking: "hmm", thinkingSignature: "sig" },
      ],
      { usage: { input: 1, output: 2, cost: 0.1 }, runId: "r1", model: "openai/gpt" },
    );
    const out = buildHistoryView([m], { includeTools: false }).messages[0];
    expect(out).toEqual({
      id: m.id,
      role: "assistant",
      content: [{ type: "text", text: "hello" }],
      timestamp: m.timestamp,
      model: "openai/gpt",
    });
  });

  it("normalises assistant text only; user text is only redacted", () => {
    const view = buildHistoryView(
      [
        msg("user", "what does <think> do? my GITHUB_TOKEN=abc"),
        msg("assistant", "<think>secret</think>It marks reasoning."),
        msg("assistant", [{ type: "text", text: "A<|im_end|>" }]),
      ],
      { includeTools: false },
    );
    expect(view.messages.map((m) => m.content)).toEqual([
      "what does <think> do? my GITHUB_TOKEN=***",
      "It marks reasoning.",
      [{ type: "text", text: "A" }],
    ]);
    expect(view.contentRedacted).toBe(true);
    expect(view.contentTruncated).toBe(false);
    expect(view.truncated).toBe(false);
  });

  it("drops tool blocks inside assistant content unless includeTools", () => {
    const m = msg("assistant", [
      { type: "text", text: "x" },
      { type: "tool_use", id: "1", name: "exec", input: {} },
    ]);
    expect(buildHistoryView([m], { includeTools: false }).messages[0]?.content).toEqual([
      { type: "text", text: "x" },
    ]);
    expect(buildHistoryView([m], { includeTools: true }).messages[0]?.content).toHaveLength(2);
  });

  it.each([
    [
      "pi-style image",
      { type: "image", data: "aGVsbG8gd29ybGQ=", mimeType: "image/png" },
      { mimeType: "image/png", bytes: 11 },
    ],
    [
      "anthropic-style image",
      { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "AAAA" } },
      { mimeType: "image/jpeg", bytes: 3 },
    ],
    ["data URL", { type: "image", data: "data:image/gif;base64,AAECAw==" }, { bytes: 4 }],
  ])("omits %s data", (_name, block, expected) => {
    const view = buildHistoryView([msg("user", [block])], { includeTools: false });
    const out = (view.messages[0]?.content as unknown[] | undefined)?.[0];
    expect(out).toEqual({ type: "image", omitted: true, ...expected });
    expect(JSON.stringify(view.messages)).not.toContain("AAAA");
    expect(view.contentTruncated).toBe(true);
  });

  it.each([
    [
      "OpenAI chat image_url",
      { type: "image_url", image_url: { url: "data:image/png;base64,AAECAwQF", detail: "auto" } },
    ],
    ["OpenAI responses input_image", { type: "input_image", image_url: "data:image/png;base64,AAECAwQF" }],
  ])("omits %s data URLs", (_name, block) => {
    const view = buildHistoryView([msg("user", [block])], { includeTools: false });
    const out = (view.messages[0]?.content as unknown[] | undefined)?.[0];
    expect(out).toEqual({ type: "image", mimeType: "image/png", omitted: true, bytes: 6 });
    expect(JSON.stringify(view.messages)).not.toContain("AAECAwQF");
    expect(view.contentTruncated).toBe(true);
  });

  it("keeps an image given by a plain URL (no image data)", () => {
    const block = { type: "image_url", image_url: { url: "https://x.test/cat.png" } };
    const view = buildHistoryView([msg("user", [block])], { includeTools: false });
    expect(view.messages[0]?.content).toEqual([block]);
    expect(view.contentTruncated).toBe(false);
  });

  it("masks secret-named fields in structured content and keeps provenance", () => {
    const view = buildHistoryView(
      [
        msg(
          "toolCall",
          {
            name: "http",
            arguments: {
              url: "https://x.test",
              apiKey: "abcdefghijklmnopqrstuvwxyz",
              headers: { Authorization: "Bearer x" },
            },
          },
          { toolName: "http" },
        ),
        msg("user", "hi", {
          provenance: {
            kind: "inter_session",
            sourceSessionKey: "agent:a:main",
            sourceChannel: "internal",
            sourceTool: "sessions_send",
          },
        }),
      ],
      { includeTools: true },
    );
    expect(view.messages[0]?.content).toEqual({
      name: "http",
      arguments: { url: "https://x.test", apiKey: "abcdef…wxyz", headers: { Authorization: "***" } },
    });
    expect(view.messages[1]?.provenance).toEqual({
      kind: "inter_session",
      sourceSessionKey: "agent:a:main",
      sourceChannel: "internal",
      sourceTool: "sessions_send",
    });
    expect(view.contentRedacted).toBe(true);
  });

  it("cuts long text fields and flags it", () => {
    const view = buildHistoryView([msg("assistant", "x".repeat(10_000))], { includeTools: false });
    expect(String(view.messages[0]?.content).length).toBe(HISTORY_TEXT_LIMIT_CHARS);
    expect(view).toMatchObject({ contentTruncated: true, truncated: true, droppedMessages: false });
  });

  it("bounds nesting depth", () => {
    let deep: unknown = "leaf";
    for (let i = 0; i < 100; i++) deep = { d: deep };
    const view = buildHistoryView([msg("toolResult", deep)], { includeTools: true });
    expect(JSON.stringify(view.messages)).toContain("nested too deep");
    expect(view.contentTruncated).toBe(true);
  });
});

describe("buildHistoryView: normalised assistant text, with the flags", () => {
  it.each([
    [
      "marker mid-line",
      "A [Tool Call: foo(1)] B continues",
      "A B continues",
      { contentRedacted: false, contentTruncated: false, truncated: false },
    ],
    [
      "payload with a closing tag in a string",
      '<tool_call>{"a":"</tool_call> leak"}</tool_call>Done.',
      "Done.",
      { contentRedacted: false, contentTruncated: false, truncated: false },
    ],
    [
      "prose mention kept, secret redacted",
      "Use <tool_call> with GITHUB_TOKEN=abc",
      "Use <tool_call> with GITHUB_TOKEN=***",
      { contentRedacted: true, contentTruncated: false, truncated: false },
    ],
    [
      "tool result block removed, the long rest cut",
      `<tool_result>{"x":1}</tool_result>${"z".repeat(5000)}`,
      `${"z".repeat(HISTORY_TEXT_LIMIT_CHARS - TRUNCATION_MARKER.length)}${TRUNCATION_MARKER}`,
      { contentRedacted: false, contentTruncated: true, truncated: true },
    ],
  ])("%s", (_name, input, expected, flags) => {
    const view = buildHistoryView([msg("assistant", input)], { includeTools: false });
    expect(view.messages[0]?.content).toBe(expected);
    expect(view).toMatchObject({ droppedMessages: false, ...flags });
  });
});

describe("buildHistoryView: size cap", () => {
  const big = (i: number) => msg("user", `${i} ${"y".repeat(3900)}`);

  it("empty input", () => {
    expect(buildHistoryView([], { includeTools: false })).toEqual({
      messages: [],
      truncated: false,
      droppedMessages: false,
      contentTruncated: false,
      contentRedacted: false,
      bytes: 2,
    });
  });

  it("keeps the newest messages that fit 80 KiB and reports bytes exactly", () => {
    const msgs = Array.from({ length: 40 }, (_, i) => big(i));
    const view = buildHistoryView(msgs, { includeTools: false });
    const json = JSON.stringify(view.messages);
    expect(view.bytes).toBe(Buffer.byteLength(json));
    expect(view.bytes).toBeLessThanOrEqual(HISTORY_MAX_BYTES);
    expect(view.messages.length).toBeGreaterThan(5);
    expect(view.messages.length).toBeLessThan(40);
    // The newest suffix, in order.
    expect(view.messages.map((m) => m.id)).toEqual(msgs.slice(40 - view.messages.length).map((m) => m.id));
    // The next older one would not have fitted.
    const next = msgs[40 - view.messages.length - 1];
    const withNext = buildHistoryView([next as TranscriptMessage], { includeTools: false }).bytes - 2;
    expect(view.bytes + withNext + 1).toBeGreaterThan(HISTORY_MAX_BYTES);
    expect(view).toMatchObject({ droppedMessages: true, truncated: true, contentTruncated: false });
  });

  it("exact boundary: fits at maxBytes, drops the oldest one byte below", () => {
    const msgs = [msg("user", "a"), msg("assistant", "b"), msg("user", "c")];
    const full = buildHistoryView(msgs, { includeTools: false });
    const atLimit = buildHistoryView(msgs, { includeTools: false, maxBytes: full.bytes });
    expect(atLimit.messages).toHaveLength(3);
    expect(atLimit.droppedMessages).toBe(false);
    const below = buildHistoryView(msgs, { includeTools: false, maxBytes: full.bytes - 1 });
    expect(below.messages.map((m) => m.id)).toEqual(msgs.slice(1).map((m) => m.id));
    expect(below).toMatchObject({ droppedMessages: true, truncated: true });
  });

  it("a message too large even alone becomes the placeholder; older ones still fit", () => {
    const older = msg("user", "before");
    const huge = msg(
      "assistant",
      Array.from({ length: 30 }, () => ({ type: "text", text: "z".repeat(4000) })),
    );
    const view = buildHistoryView([older, huge], { includeTools: false });
    expect(view.messages).toEqual([
      { id: older.id, role: "user", content: "before", timestamp: older.timestamp },
      { id: huge.id, role: "assistant", content: MESSAGE_TOO_LARGE, timestamp: huge.timestamp },
    ]);
    expect(view).toMatchObject({ contentTruncated: true, truncated: true, droppedMessages: false });
  });

  it("maxBytes too small for anything drops everything", () => {
    const view = buildHistoryView([msg("user", "hello")], { includeTools: false, maxBytes: 10 });
    expect(view).toMatchObject({ messages: [], droppedMessages: true, truncated: true, bytes: 2 });
  });
});
