import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SUMMARY_HEADER } from "../../src/agent/compaction.js";
import type { ConfigInput } from "../../src/config/index.js";
import { createLogger } from "../../src/log.js";
import { ensureSession } from "../../src/sessions/service.js";
import type { TranscriptMessage, TranscriptRef, Usage } from "../../src/store/types.js";
import {
  type ChatRequestMessage,
  contentText,
  echoHandler,
  type OpenAIFake,
  type RecordedRequest,
  startOpenAIFake,
} from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";

/**
 * Pruning and compaction end to end: the real runtime and `openai` provider against the loopback
 * fake, asserting exactly what the model receives, and what the transcript holds afterwards.
 */

let fake: OpenAIFake;
let t: TestApp | undefined;
let clock = 1_800_000_000_000;

beforeAll(async () => {
  fake = await startOpenAIFake();
});
afterAll(async () => {
  await fake.close();
});
afterEach(async () => {
  fake.setDefault(echoHandler);
  await t?.stop();
  t = undefined;
});

const KEY = "agent:main:main";
const isSummaryRequest = (r: RecordedRequest) =>
  contentText(r.body.messages?.[0]?.content).startsWith("You compact a chat transcript");

async function setup(opts: {
  logLines?: string[];
  contextTokens?: number;
  maxOutputTokens?: number;
  agents?: ConfigInput["agents"];
  extraModels?: Record<string, { contextTokens?: number }>;
}) {
  t = await startTestApp(
    {
      models: {
        default: "fake/m1",
        providers: {
          fake: {
            kind: "openai",
            baseUrl: fake.url,
            timeoutMs: 5000,
            maxRetries: 0,
            models: {
              m1: {
                contextTokens: opts.contextTokens ?? 100_000,
                ...(opts.maxOutputTokens ? { maxOutputTokens: opts.maxOutputTokens } : {}),
              },
              ...(opts.extraModels ?? {}),
            },
          },
        },
      },
      tools: { profile: "minimal" },
      ...(opts.agents ? { agents: opts.agents } : {}),
    },
    {
      now: () => clock,
      ...(opts.logLines
        ? {
            logger: createLogger({
              level: "warn",
              destination: { write: (line: string) => void opts.logLines?.push(line) },
            }),
          }
        : {}),
    },
  );
  const entry = await ensureSession(t.app.services, KEY, { agentId: "main" });
  const ref: TranscriptRef = { agentId: "main", sessionId: entry.sessionId };
  return { app: t, ref };
}

type Seed = Omit<TranscriptMessage, "sessionId" | "timestamp"> & { timestamp?: number };
async function seed(app: TestApp, ref: TranscriptRef, lines: Seed[]) {
  for (const l of lines)
    await app.app.services.store.transcripts.append(ref, {
      ...l,
      sessionId: ref.sessionId,
      timestamp: l.timestamp ?? clock,
    });
}

/** user → tool call → tool result → assistant, with ids `<p>u`, `<p>c`, `<p>r`, `<p>a`. */
function toolTurn(p: string, result: string, toolName = "read_file", usage?: Usage): Seed[] {
  return [
    { id: `${p}u`, role: "user", content: `question ${p}` },
    { id: `${p}c`, role: "toolCall", toolCallId: `call-${p}`, toolName, content: { arguments: { p } } },
    { id: `${p}r`, role: "toolResult", toolCallId: `call-${p}`, toolName, content: result },
    { id: `${p}a`, role: "assistant", content: `answer ${p}`, ...(usage ? { usage } : {}) },
  ];
}

function chatTurn(p: string, chars = 20, usage?: Usage): Seed[] {
  return [
    { id: `${p}u`, role: "user", content: `question ${p} ${"q".repeat(chars)}` },
    {
      id: `${p}a`,
      role: "assistant",
      content: `answer ${p} ${"a".repeat(chars)}`,
      ...(usage ? { usage } : {}),
    },
  ];
}

/** What the model received, without the system message, as [role, text] pairs (tool calls named). */
function received(r: RecordedRequest | undefined): Array<[string, string]> {
  return (r?.body.messages ?? [])
    .slice(1)
    .map((m: ChatRequestMessage) => [
      m.role,
      m.tool_calls ? `calls:${m.tool_calls.map((c) => c.function.name).join(",")}` : contentText(m.content),
    ]);
}

async function send(app: TestApp, message: string) {
  const before = fake.chatRequests().length;
  const r = await app.rpc("chat.send", { sessionKey: KEY, message, timeoutSeconds: 20 });
  expect(r.result?.status).toBe("ok");
  return { reply: r.result.reply as string, requests: fake.chatRequests().slice(before) };
}

const big = (c: string) => `${c.repeat(1500)}${"-".repeat(7000)}${c.toUpperCase().repeat(1500)}`;
const trimmedOf = (c: string) =>
  `${c.repeat(1500)}\n...\n[Tool result trimmed: 10000 chars originally; kept the first 1500 and the last 1500]\n...\n${c.toUpperCase().repeat(1500)}`;

describe("pruning before each model call", () => {
  it("soft-trims old tool results in what the model receives; the transcript file is unchanged", async () => {
    const { app, ref } = await setup({
      agents: { defaults: { contextPruning: { mode: "always", keepLastAssistants: 1 } } },
    });
    await seed(app, ref, [...toolTurn("t1", big("x")), ...toolTurn("t2", big("y")), ...chatTurn("t3")]);
    const file = app.app.services.store.transcripts.locate(ref);
    const before = readFileSync(file, "utf8");

    const { requests } = await send(app, "next");
    expect(requests).toHaveLength(1);
    expect(received(requests[0])).toEqual([
      ["user", "question t1"],
      ["assistant", "calls:read_file"],
      ["tool", trimmedOf("x")],
      ["assistant", "answer t1"],
      ["user", "question t2"],
      ["assistant", "calls:read_file"],
      ["tool", trimmedOf("y")],
      ["assistant", "answer t2"],
      ["user", `question t3 ${"q".repeat(20)}`],
      ["assistant", `answer t3 ${"a".repeat(20)}`],
      ["user", "next"],
    ]);
    // Pruning is in memory only: every line that was there is byte-for-byte the same.
    const after = readFileSync(file, "utf8");
    expect(after.startsWith(before)).toBe(true);
    expect(after.split("\n").filter(Boolean)).toHaveLength(before.split("\n").filter(Boolean).length + 2);
  });

  it("hard-clears the oldest results past hardClearRatio of the window; images and denied tools stay", async () => {
    const image = JSON.stringify([{ type: "image", mimeType: "image/png", data: "A".repeat(5000) }]);
    const { app, ref } = await setup({
      contextTokens: 20_000, // 80,000 chars; hardClearRatio 0.5 → 40,000
      agents: {
        defaults: {
          compaction: { enabled: false },
          contextPruning: {
            mode: "always",
            keepLastAssistants: 1,
            softTrim: { maxChars: 1_000_000 },
            tools: { deny: ["secret_*"] },
          },
        },
      },
    });
    const r = (c: string) => c.repeat(15_000);
    await seed(app, ref, [
      ...toolTurn("i", image, "screenshot"),
      ...toolTurn("d", "d".repeat(10_000), "secret_store"),
      ...toolTurn("o1", r("1")),
      ...toolTurn("o2", r("2")),
      ...toolTurn("o3", r("3")),
      ...chatTurn("last"),
    ]);
    const { requests } = await send(app, "go");
    const tools = received(requests[0]).filter(([role]) => role === "tool");
    expect(tools.map(([, c]) => (c.length > 100 ? `${c[0]}×${c.length}` : c))).toEqual([
      `[×${image.length}`, // image result untouched
      "d×10000", // denied tool: never pruned
      "[Old tool result content cleared]",
      "[Old tool result content cleared]",
      "3×15000", // once under the limit, the newer ones stay
    ]);
    // User and assistant text are never changed.
    expect(
      received(requests[0])
        .filter(([role]) => role === "user")
        .map(([, c]) => c),
    ).toEqual([
      "question i",
      "question d",
      "question o1",
      "question o2",
      "question o3",
      `question last ${"q".repeat(20)}`,
      "go",
    ]);
  });

  it("cache-ttl prunes only once the last model call is older than ttl; an agent can turn pruning off", async () => {
    const { app, ref } = await setup({
      agents: { defaults: { contextPruning: { mode: "cache-ttl", ttl: "5m", keepLastAssistants: 1 } } },
    });
    await seed(app, ref, [...toolTurn("t1", big("x")), ...chatTurn("t2")]);
    const toolText = (r: RecordedRequest | undefined) => received(r).find(([role]) => role === "tool")?.[1];
    clock += 60_000; // the seeded assistant line is the last call: 1 min ago, cache still warm
    expect(toolText((await send(app, "soon")).requests[0])).toBe(big("x"));
    clock += 10 * 60_000; // 10 min since the last call: the provider's cache has expired
    expect(toolText((await send(app, "later")).requests[0])).toBe(trimmedOf("x"));
    await app.stop();
    t = undefined;

    const off = await setup({
      agents: {
        defaults: { contextPruning: { mode: "always", keepLastAssistants: 1 } },
        list: [{ id: "main", contextPruning: { mode: "off" } }],
      },
    });
    await seed(off.app, off.ref, [...toolTurn("t1", big("x")), ...chatTurn("t2")]);
    expect(toolText((await send(off.app, "x")).requests[0])).toBe(big("x"));
  });
});

describe("compaction", () => {
  const summaryHandler =
    (summary: string) =>
    (r: RecordedRequest): ReturnType<typeof echoHandler> =>
      isSummaryRequest(r) ? { text: summary } : echoHandler(r);

  it("a turn past the threshold summarises the older part; the model gets summary + newer messages", async () => {
    const { app, ref } = await setup({
      contextTokens: 6000, // the summariser may read half of it: 12,000 chars, all of the older part
      agents: { defaults: { compaction: { threshold: 0.3, keepLastTurns: 2 } } },
    });
    fake.setDefault(summaryHandler("SUMMARY: six questions about q were asked and answered."));
    await seed(
      app,
      ref,
      [0, 1, 2, 3, 4, 5].flatMap((i) => chatTurn(`c${i}`, 800)),
    );
    const countBefore = await app.app.services.store.transcripts.count(ref);

    const { reply, requests } = await send(app, "what did I ask?");
    expect(reply).toBe("what did I ask?");
    expect(requests).toHaveLength(2);
    // 1. The summary request carries the older turns, not the kept ones.
    const sumText = contentText(requests[0]?.body.messages?.[1]?.content);
    expect(isSummaryRequest(requests[0] as RecordedRequest)).toBe(true);
    expect(sumText).toContain("question c0");
    expect(sumText).toContain("answer c4");
    expect(sumText).not.toContain("question c5");
    // 2. The turn: summary in the system prompt, then exactly the kept turns and the new message.
    const sys = contentText(requests[1]?.body.messages?.[0]?.content);
    expect(sys).toContain(`${SUMMARY_HEADER}\nSUMMARY: six questions about q were asked and answered.`);
    expect(received(requests[1])).toEqual([
      ["user", `question c5 ${"q".repeat(800)}`],
      ["assistant", `answer c5 ${"a".repeat(800)}`],
      ["user", "what did I ask?"],
    ]);

    // The transcript keeps everything and gains one compaction line.
    const all = await app.app.services.store.transcripts.readTail(ref, { limit: 100, includeTools: true });
    expect(all).toHaveLength(countBefore + 3);
    const line = all.find((m) => m.role === "compaction");
    expect(line?.content).toMatchObject({
      summary: "SUMMARY: six questions about q were asked and answered.",
      fromId: "c0u",
      toId: "c4a",
    });
    const c = line?.content as { tokensBefore: number; tokensAfter: number };
    expect(c.tokensBefore).toBeGreaterThan(0.3 * 6000);
    expect(c.tokensAfter).toBeLessThan(c.tokensBefore);
    expect((await app.app.services.store.sessions.get(KEY))?.compactionCount).toBe(1);

    // sessions_history shows the compaction as one marked message, the raw messages still there.
    const hist = await app.rpc("sessions.history", { sessionKey: KEY, limit: 100 });
    const shown = hist.result.messages as Array<{ role: string; content: string; compaction?: object }>;
    const marked = shown.filter((m) => m.role === "compaction");
    expect(marked).toHaveLength(1);
    expect(marked[0]?.content).toBe(
      "[Compaction: earlier messages summarised]\nSUMMARY: six questions about q were asked and answered.",
    );
    expect(marked[0]?.compaction).toMatchObject({ fromId: "c0u", toId: "c4a" });
    expect(shown.filter((m) => m.role === "user")).toHaveLength(7);

    // The next turn builds on the compaction without compacting again.
    const next = await send(app, "and now?");
    expect(next.requests).toHaveLength(1);
    expect(contentText(next.requests[0]?.body.messages?.[0]?.content)).toContain("SUMMARY: six questions");
    expect(received(next.requests[0]).map(([role, text]) => `${role}:${text.slice(0, 12)}`)).toEqual([
      "user:question c5 ",
      "assistant:answer c5 aa",
      "user:what did I a",
      "assistant:what did I a",
      "user:and now?",
    ]);
  });

  it("the provider's reported prompt size decides, room is left for maxOutputTokens; a cheaper compaction.model is used", async () => {
    const { app, ref } = await setup({
      contextTokens: 10_000,
      maxOutputTokens: 4000, // threshold 0.8 → 8,000, but the answer needs room: compact above 6,000
      extraModels: { cheap: {} },
      agents: { defaults: { compaction: { threshold: 0.8, keepLastTurns: 1, model: "fake/cheap" } } },
    });
    fake.setDefault(summaryHandler("S2"));
    // Tiny by characters, but the last call reported a 7,000-token prompt.
    await seed(app, ref, [
      ...chatTurn("a"),
      ...chatTurn("b", 20, { input: 1000, cacheRead: 6000, output: 10 }),
    ]);
    const { requests } = await send(app, "go on");
    expect(requests.map((r) => r.body.model)).toEqual(["cheap", "m1"]);
    expect(received(requests[1])).toEqual([["user", "go on"]]);
  });

  it("a failed compaction leaves the session usable: the turn runs on the window", async () => {
    const logLines: string[] = [];
    const { app, ref } = await setup({
      logLines,
      contextTokens: 4000,
      agents: { defaults: { compaction: { threshold: 0.5, keepLastTurns: 2 } } },
    });
    fake.setDefault((r) =>
      isSummaryRequest(r) ? { status: 500, error: "summariser down" } : echoHandler(r),
    );
    await seed(
      app,
      ref,
      [0, 1, 2, 3, 4, 5].flatMap((i) => chatTurn(`f${i}`, 800)),
    );
    const { reply, requests } = await send(app, "still there?");
    expect(reply).toBe("still there?");
    // compaction goes through the failover chain: a 500 gets its one quick retry (API.md §8.4)
    expect(requests.map(isSummaryRequest)).toEqual([true, true, false]);
    const tail = await app.app.services.store.transcripts.readTail(ref, { limit: 100, includeTools: true });
    expect(tail.some((m) => m.role === "compaction")).toBe(false);
    expect(received(requests[2]).at(-1)).toEqual(["user", "still there?"]);
    // ...and says so in the log.
    const warned = logLines.map((l) => JSON.parse(l) as { msg: string; sessionKey?: string });
    expect(
      warned.find((l) => l.msg === "compaction failed; the session continues with its window"),
    ).toMatchObject({ sessionKey: KEY });
  });

  it("contextTokens on the row is the last prompt's real size as the provider reported it", async () => {
    const { app } = await setup({});
    fake.enqueue({ text: "ok", usage: { prompt: 1234, completion: 5, cached: 200 } });
    await send(app, "hello");
    const row = (await app.rpc("sessions.list", {})).result.sessions.find(
      (s: { key: string }) => s.key === KEY,
    );
    expect(row.contextTokens).toBe(1234);
  });
});

describe("per-model facts", () => {
  it("a model's configured maxOutputTokens caps each reply: the openai request carries it as max_tokens", async () => {
    const { app } = await setup({ maxOutputTokens: 321 });
    const { requests } = await send(app, "hello");
    expect(requests.map((r) => r.body.max_tokens)).toEqual([321]);
  });

  it("without a configured maxOutputTokens no max_tokens is sent (the server's own limit applies)", async () => {
    const { app } = await setup({});
    const { requests } = await send(app, "hello");
    expect(requests).toHaveLength(1);
    expect("max_tokens" in requests[0]!.body).toBe(false);
  });
});
