import { describe, expect, it } from "vitest";
import { compactionFor, contextOfTail, splitForCompaction } from "../../../src/agent/compaction.js";
import { DEFAULT_CONTEXT_TOKENS, knownModelFacts } from "../../../src/agent/context-window.js";
import { jsonLength, toUnits, windowUnits } from "../../../src/agent/prompt.js";
import { pruneUnits, pruningDue, pruningFor, toolPrunable } from "../../../src/agent/pruning.js";
import { contextPruningSchema } from "../../../src/config/context.js";
import { parseConfig } from "../../../src/config/index.js";
import type { ModelMessage } from "../../../src/services/models.js";
import { lastDailyBoundary, nextResetAt, resetDue, resetRuleFor } from "../../../src/sessions/reset.js";
import type { SessionEntry, TranscriptMessage } from "../../../src/store/types.js";
import { seededRandom } from "../../helpers.js";

/** Pure parts of pruning, compaction and resets. */

const cfg = (over: Record<string, unknown> = {}) => contextPruningSchema.parse({ mode: "always", ...over });

function turn(i: number, result: string, name = "read_file"): ModelMessage[][] {
  return [
    [{ role: "user", content: `question ${i}` }],
    [
      { role: "assistant", content: `looking ${i}`, toolCalls: [{ id: `c${i}`, name, arguments: "{}" }] },
      { role: "tool", toolCallId: `c${i}`, name, content: result },
    ],
    [{ role: "assistant", content: `answer ${i}` }],
  ];
}

describe("pruneUnits", () => {
  const big = `${"H".repeat(2000)}${"m".repeat(6000)}${"T".repeat(2000)}`;

  it("soft-trims old tool results to head + tail with the original size; newer and non-tool text untouched", () => {
    const units = [...turn(1, big), ...turn(2, big), ...turn(3, big)];
    const before = JSON.stringify(units);
    const { units: out, stats } = pruneUnits(units, cfg({ keepLastAssistants: 3 }), {
      windowTokens: 1_000_000,
      baseChars: 0,
    });
    expect(JSON.stringify(units)).toBe(before); // input not mutated
    const tools = out.flat().filter((m) => m.role === "tool");
    // Assistants: looking1, answer1, looking2, answer2, looking3, answer3 — the last 3 start at answer2.
    expect(tools[0]?.content).toBe(
      `${"H".repeat(1500)}\n...\n[Tool result trimmed: 10000 chars originally; kept the first 1500 and the last 1500]\n...\n${"T".repeat(1500)}`,
    );
    expect(tools[1]?.content).toBe(tools[0]?.content);
    expect(tools[2]?.content).toBe(big); // inside the last 3 assistant turns
    expect(stats.softTrimmed).toBe(2);
    const text = (u: ModelMessage[][]) =>
      u
        .flat()
        .filter((m) => m.role !== "tool")
        .map((m) => m.content);
    expect(text(out)).toEqual(text(units));
  });

  it("hard-clears the oldest prunable results past hardClearRatio of the window", () => {
    const units = [...turn(1, big), ...turn(2, big), ...turn(3, "small"), ...turn(4, "small")];
    const { units: out, stats } = pruneUnits(units, cfg({ keepLastAssistants: 2, hardClearRatio: 0.5 }), {
      windowTokens: 1000, // 4,000 chars → limit 2,000 chars
      baseChars: 0,
    });
    const tools = out.flat().filter((m) => m.role === "tool");
    expect(tools.map((m) => m.content.slice(0, 40))).toEqual([
      "[Old tool result content cleared]",
      "[Old tool result content cleared]",
      "small", // under the limit once the two large ones are cleared (oldest first)
      "small",
    ]);
    expect(stats.hardCleared).toBe(2);
    const off = pruneUnits(units, cfg({ keepLastAssistants: 2, hardClear: { enabled: false } }), {
      windowTokens: 1000,
      baseChars: 0,
    });
    expect(off.stats.hardCleared).toBe(0);
  });

  it("leaves results with images alone and honours tools.allow/deny (wildcards, deny wins)", () => {
    const image = JSON.stringify([{ type: "image", data: "A".repeat(9000), mimeType: "image/png" }]);
    const units = [...turn(1, image), ...turn(2, big, "web_fetch"), ...turn(3, big, "exec"), ...turn(4, big)];
    const run = (tools: { allow?: string[]; deny?: string[] }) =>
      pruneUnits(units, cfg({ keepLastAssistants: 2, tools }), { windowTokens: 1e6, baseChars: 0 })
        .units.flat()
        .filter((m) => m.role === "tool")
        .map((m) => m.content.length < 5000);
    expect(run({})).toEqual([false, true, true, false]);
    expect(run({ allow: ["WEB_*"] })).toEqual([false, true, false, false]);
    expect(run({ allow: ["*"], deny: ["web_*"] })).toEqual([false, false, true, false]);
    expect(toolPrunable("exec", { allow: ["ex*"], deny: ["exec"] })).toBe(false);
  });

  it("mode off never prunes, always does, cache-ttl only after the ttl since the last call", () => {
    expect(pruningDue(cfg({ mode: "off" }), 0, 1e12)).toBe(false);
    expect(pruningDue(cfg({ mode: "always" }), 1e12, 1e12)).toBe(true);
    const ttl = cfg({ mode: "cache-ttl", ttl: "5m" });
    expect(pruningDue(ttl, 1_000_000, 1_000_000 + 4 * 60_000)).toBe(false);
    expect(pruningDue(ttl, 1_000_000, 1_000_000 + 6 * 60_000)).toBe(true);
    expect(pruningDue(ttl, undefined, 1)).toBe(true);
  });
});

describe("per-agent overrides", () => {
  it("unset fields inherit agents.defaults", () => {
    const config = parseConfig({
      agents: {
        defaults: {
          compaction: { threshold: 0.5 },
          contextPruning: { mode: "always", softTrim: { maxChars: 100 } },
        },
        list: [
          { id: "main", compaction: { model: "x/cheap" }, contextPruning: { softTrim: { headChars: 10 } } },
        ],
      },
    });
    expect(compactionFor(config, "main")).toEqual({
      enabled: true,
      threshold: 0.5,
      model: "x/cheap",
      keepLastTurns: 4,
    });
    const p = pruningFor(config, "main");
    expect(p.mode).toBe("always");
    expect(p.softTrim).toEqual({ maxChars: 100, headChars: 10, tailChars: 1500 });
  });
});

describe("context windows", () => {
  it("well-known families have defaults; unknown models 128k; configured facts win", () => {
    expect(knownModelFacts("gpt-4.1-mini").contextTokens).toBe(1_047_576);
    expect(knownModelFacts("claude-sonnet-4-5").contextTokens).toBe(200_000);
    expect(knownModelFacts("gpt-4o").maxOutputTokens).toBe(16_384);
    expect(knownModelFacts("my-local-llm").contextTokens).toBe(DEFAULT_CONTEXT_TOKENS);
  });
});

const msg = (id: string, role: TranscriptMessage["role"], content: unknown = id): TranscriptMessage => ({
  id,
  sessionId: "s",
  role,
  content,
  timestamp: 1,
});

describe("compaction helpers", () => {
  const turns = (n: number, from = 0) =>
    Array.from({ length: n }, (_, i) => [
      msg(`u${from + i}`, "user"),
      msg(`a${from + i}`, "assistant"),
    ]).flat();

  it("splits at a user message, keeping the newest keepLastTurns turns", () => {
    const s = splitForCompaction(turns(6), 4);
    expect(s?.older.map((m) => m.id)).toEqual(["u0", "a0", "u1", "a1"]);
    expect(s?.kept[0]?.id).toBe("u2");
    expect(splitForCompaction(turns(4), 4)).toBeNull();
  });

  it("the latest compaction covers up to toId; the kept turns before its line and everything after are used", () => {
    const line = msg("c1", "compaction", {
      summary: "S",
      fromId: "u0",
      toId: "a1",
      tokensBefore: 10,
      tokensAfter: 5,
    });
    const tail = [...turns(3), line, ...turns(1, 3)];
    const ctx = contextOfTail(tail, 400);
    expect(ctx.compaction?.summary).toBe("S");
    expect(ctx.messages.map((m) => m.id)).toEqual(["u2", "a2", "u3", "a3"]);
    expect(ctx.afterLine).toBe(2);
    // Without a compaction: the whole tail, `truncated` when the read was full.
    expect(contextOfTail(turns(2), 4).truncated).toBe(true);
    expect(contextOfTail(turns(2), 5).truncated).toBe(false);
  });

  it("without a compaction line the tail itself is the context (no copy); an unusable line is still left out", () => {
    const plain = turns(3);
    expect(contextOfTail(plain, 400).messages).toBe(plain);
    const broken = msg("c1", "compaction", { summary: 42 }); // not a compaction's content
    const tail = [...turns(1), broken, ...turns(1, 1)];
    const ctx = contextOfTail(tail, 400);
    expect(ctx.compaction).toBeNull();
    expect(ctx.messages.map((m) => m.id)).toEqual(["u0", "a0", "u1", "a1"]);
  });

  it("for any tail: the messages after toId and after the latest line, older compaction lines left out", () => {
    const rnd = seededRandom(77);
    for (let round = 0; round < 300; round++) {
      const tail: TranscriptMessage[] = [];
      const n = Math.floor(rnd() * 30);
      for (let i = 0; i < n; i++) {
        const ids = tail.filter((m) => m.role !== "compaction").map((m) => m.id);
        const pick = ids[Math.floor(rnd() * (ids.length + 1))] ?? "missing";
        tail.push(
          rnd() < 0.15
            ? msg(`c${i}`, "compaction", {
                summary: `S${i}`,
                fromId: "x",
                toId: pick,
                tokensBefore: 9,
                tokensAfter: 3,
              })
            : msg(`m${i}`, rnd() < 0.5 ? "user" : "assistant"),
        );
      }
      const line = tail.findLastIndex((m) => m.role === "compaction");
      const ctx = contextOfTail(tail, 400);
      const plain = (ms: TranscriptMessage[]) => ms.filter((m) => m.role !== "compaction").map((m) => m.id);
      if (line < 0) {
        expect(ctx.compaction).toBeNull();
        expect(ctx.messages.map((m) => m.id)).toEqual(plain(tail));
        continue;
      }
      const toId = (tail[line]!.content as { toId: string }).toId;
      const before = tail.slice(0, line);
      const to = before.findLastIndex((m) => m.id === toId);
      const kept = plain(before.slice(to + 1));
      expect(ctx.compaction?.id).toBe(tail[line]!.id);
      expect(ctx.messages.map((m) => m.id)).toEqual([...kept, ...plain(tail.slice(line + 1))]);
      expect(ctx.afterLine).toBe(kept.length);
    }
  });
});

describe("reset policies", () => {
  const entry = (p: Partial<SessionEntry>): SessionEntry => ({
    key: "k",
    sessionId: "s",
    agentId: "main",
    createdAt: 0,
    updatedAt: 0,
    ...p,
  });

  it("daily resets a session started before the last atHour; idle after idleMinutes without a message", () => {
    const at = (d: number, h: number, m = 0) => new Date(2026, 11, d, h, m).getTime();
    const daily = { mode: "daily" as const, atHour: 4, idleMinutes: 60 };
    expect(lastDailyBoundary(at(2, 3), 4)).toBe(at(1, 4));
    expect(resetDue(daily, entry({ createdAt: at(1, 5) }), at(2, 3, 59))).toBeNull();
    expect(resetDue(daily, entry({ createdAt: at(1, 5) }), at(2, 4, 1))).toBe("daily");
    expect(nextResetAt(daily, entry({ createdAt: at(1, 5) }), at(1, 6))).toBe(at(2, 4));
    const idle = { mode: "idle" as const, atHour: 4, idleMinutes: 60 };
    const e = entry({ createdAt: at(1, 5), lastInteractionAt: at(1, 6) });
    expect(resetDue(idle, e, at(1, 7))).toBeNull();
    expect(resetDue(idle, e, at(1, 7, 1))).toBe("idle");
    expect(nextResetAt(idle, e, at(1, 6, 30))).toBe(at(1, 7));
  });

  it("byChatType then byChannel override the base rule field by field", () => {
    const config = parseConfig({
      session: {
        reset: {
          mode: "daily",
          atHour: 5,
          byChatType: { group: { mode: "idle", idleMinutes: 30 } },
          byChannel: { discord: { idleMinutes: 10080 } },
        },
      },
    });
    expect(resetRuleFor(config, "telegram", "direct")).toEqual({
      mode: "daily",
      atHour: 5,
      idleMinutes: 1440,
    });
    expect(resetRuleFor(config, "telegram", "group")).toEqual({ mode: "idle", atHour: 5, idleMinutes: 30 });
    expect(resetRuleFor(config, "discord", "group")).toEqual({ mode: "idle", atHour: 5, idleMinutes: 10080 });
    expect(() => parseConfig({ session: { reset: { atHour: 24 } } })).toThrow(/atHour/);
  });
});

/** chars/4 of the JSON text, rounded up: what an estimate of a unit must equal. */
const byJson = (u: unknown) => Math.ceil(JSON.stringify(u).length / 4);

describe("jsonLength (the estimates' JSON size, without the text)", () => {
  it("equals JSON.stringify(value).length for random values: escapes, surrogates, numbers, holes, undefined members", () => {
    let x = 7;
    const next = () => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x / 2 ** 32;
    };
    const CHARS = [
      "a",
      "Z",
      " ",
      '"',
      "\\",
      "\n",
      "\t",
      "\b",
      "\f",
      "\r",
      "\u0000",
      "\u001f",
      "\u007f",
      "é",
      "—",
      "\u2028",
      "\ud83c\udf0d",
      "\ud800",
      "\udfff",
      "/",
      "<",
    ];
    const str = () => {
      let t = "";
      for (let i = Math.floor(next() * 12); i > 0; i--) t += CHARS[Math.floor(next() * CHARS.length)];
      return t;
    };
    const NUMS = [0, -0, 1, -1.5, 0.1, 1e21, 1e-7, 123456789, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53];
    const value = (depth: number): unknown => {
      const r = next();
      if (depth > 4 || r < 0.3) return str();
      if (r < 0.4) return NUMS[Math.floor(next() * NUMS.length)];
      if (r < 0.45) return next() < 0.5;
      if (r < 0.5) return null;
      if (r < 0.55) return undefined;
      if (r < 0.75) {
        const a: unknown[] = [];
        for (let i = Math.floor(next() * 4); i > 0; i--) a.push(value(depth + 1));
        if (next() < 0.1) a.length += 2; // holes
        return a;
      }
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(next() * 4); i > 0; i--) o[str()] = value(depth + 1);
      if (next() < 0.1) o.fn = () => 1;
      return o;
    };
    for (let i = 0; i < 5000; i++) {
      const v = value(0);
      const want = JSON.stringify(v);
      if (want === undefined) continue;
      expect(jsonLength(v, 0), want).toBe(want.length);
    }
    // what JSON.stringify treats specially is measured by serialising it
    expect(jsonLength({ at: new Date(0), boxed: new String("x") }, 0)).toBe(
      JSON.stringify({ at: new Date(0), boxed: new String("x") }).length,
    );
    const deep: unknown[] = [];
    let cur = deep;
    for (let i = 0; i < 100; i++) {
      const inner: unknown[] = ['"'];
      cur.push(inner);
      cur = inner;
    }
    expect(jsonLength(deep, 0)).toBe(JSON.stringify(deep).length);
    // only own members count: an inherited enumerable one is not written
    const child = Object.assign(Object.create({ inherited: "not in the JSON" }) as object, { own: 1 });
    expect(jsonLength(child, 0)).toBe(JSON.stringify(child).length);
  });
});

describe("window unit estimates (carried from the last window, counted without serialising)", () => {
  const msg = (
    id: string,
    role: TranscriptMessage["role"],
    content: unknown,
    extra = {},
  ): TranscriptMessage => ({
    id,
    sessionId: "s",
    role,
    content,
    timestamp: 1,
    ...extra,
  });

  it("equals estimateTokens of every unit while a tool step grows, for shared and copied messages", () => {
    const log: TranscriptMessage[] = [msg("u1", "user", "hello")];
    const check = (messages: TranscriptMessage[]) => {
      const sources: TranscriptMessage[][] = [];
      const units = toUnits(messages, sources);
      expect(sources.map((s) => s[0]?.id)).toHaveLength(units.length);
      expect(windowUnits(messages).costs).toEqual(units.map(byJson));
    };
    check(log);
    log.push(msg("a1", "assistant", "let me look"));
    check(log);
    log.push(
      msg("c1", "toolCall", { arguments: { path: "x" } }, { toolCallId: "t1", toolName: "read_file" }),
    );
    check(log); // the call has no result yet: answered by a placeholder
    log.push(msg("r1", "toolResult", '{"status":"ok","text":"a long file body"}', { toolCallId: "t1" }));
    check(log);
    log.push(
      msg("c2", "toolCall", { arguments: { path: "y" } }, { toolCallId: "t2", toolName: "read_file" }),
    );
    check(log);
    log.push(msg("r2", "toolResult", "short", { toolCallId: "t2" }));
    log.push(msg("a2", "assistant", "done"));
    check(log);
    check(structuredClone(log));
    check(log);
  });

  it("does not reuse an estimate for a unit of another session or with another last message", () => {
    const estimate = (messages: TranscriptMessage[]) => {
      const sources: TranscriptMessage[][] = [];
      const units = toUnits(messages, sources);
      return { got: windowUnits(messages).costs, want: units.map(byJson), sources };
    };
    const long = "a result long enough to cost many more tokens than the short one ".repeat(20);
    const call = (sessionId: string) =>
      msg(
        "c1",
        "toolCall",
        { arguments: { path: "x" } },
        { sessionId, toolCallId: "t1", toolName: "read_file" },
      );
    const result = (id: string, content: string, sessionId = "s") =>
      msg(id, "toolResult", content, { sessionId, toolCallId: "t1" });
    // one unit of two messages each time, all starting at the same id ("c1")
    const first = estimate([call("s"), result("r1", "short")]);
    expect(first.sources.map((u) => u.map((m) => m.id))).toEqual([["c1", "r1"]]);
    expect(first.got).toEqual(first.want);
    const otherSession = estimate([call("t"), result("r1", long, "t")]);
    expect(otherSession.got).toEqual(otherSession.want);
    const otherLast = estimate([call("s"), result("r2", long)]);
    expect(otherLast.got).toEqual(otherLast.want);
    expect(otherLast.want[0]).toBeGreaterThan(first.want[0]! * 5);
  });

  it("equals estimateTokens for sliding windows of two sessions in turn, cut anywhere (a unit split at the start too)", () => {
    const logs: Record<string, TranscriptMessage[]> = { s: [], t: [] };
    let n = 0;
    const add = (sid: string, role: TranscriptMessage["role"], content: unknown, extra = {}) =>
      logs[sid]!.push(msg(`${sid}${n++}`, role, content, { sessionId: sid, ...extra }));
    for (let turn = 0; turn < 60; turn++) {
      for (const sid of ["s", "t"]) {
        add(sid, "user", `question ${turn} ${"x".repeat(turn % 7)}`);
        if (turn % 3 === 0) {
          add(
            sid,
            "toolCall",
            { arguments: { path: `f${turn}` } },
            { toolCallId: `c${turn}`, toolName: "read_file" },
          );
          add(sid, "toolResult", "y".repeat(10 + turn), { toolCallId: `c${turn}` });
        }
        add(sid, "assistant", `answer ${turn}`.repeat(1 + (turn % 4)));
        const log = logs[sid]!;
        // windows of the newest 12..20 messages: some start inside a tool step
        const window = log.slice(-(12 + (turn % 9)));
        const sources: TranscriptMessage[][] = [];
        const units = toUnits(window, sources);
        expect(windowUnits(window).costs).toEqual(units.map(byJson));
      }
    }
  });
});

describe("windowUnits (a session's window carried from its last one)", () => {
  it("equals toUnits and estimateTokens for random sessions' windows: tool steps, missing results, orphans, re-reads, cuts", () => {
    const next = seededRandom(42);
    const sessions = ["s", "t", "u"];
    const logs: Record<string, TranscriptMessage[]> = { s: [], t: [], u: [] };
    let n = 0;
    const add = (sid: string, role: TranscriptMessage["role"], content: unknown, extra = {}) =>
      logs[sid]!.push({ id: `${sid}-${n++}`, sessionId: sid, role, content, timestamp: 1, ...extra });
    let reused = 0;
    const earlier: Array<{ units: unknown; want: unknown }> = [];
    for (let step = 0; step < 900; step++) {
      const sid = sessions[Math.floor(next() * sessions.length)]!;
      // append a few messages of a random shape
      const r = next();
      if (r < 0.35) add(sid, "user", `question ${step} ${"x".repeat(step % 9)}`);
      else if (r < 0.6) add(sid, "assistant", `answer ${step}`.repeat(1 + (step % 3)));
      else {
        const calls = 1 + Math.floor(next() * 3);
        if (next() < 0.5) add(sid, "assistant", `calling ${calls}`);
        const ids: string[] = [];
        for (let c = 0; c < calls; c++) {
          const id = `call${n}`;
          ids.push(id);
          add(
            sid,
            "toolCall",
            { arguments: { path: `f${step}` } },
            { toolCallId: id, toolName: "read_file" },
          );
        }
        for (const id of ids) {
          const roll = next();
          if (roll < 0.15) continue; // no result (a crash mid-tool)
          add(sid, "toolResult", "y".repeat(5 + Math.floor(next() * 40)), {
            toolCallId: roll < 0.2 ? "unknown-call" : id, // an orphan now and then
            toolName: "read_file",
          });
        }
        if (next() < 0.3) {
          // a second tool step straight after the first
          const id = `call${n}`;
          add(sid, "toolCall", { arguments: "{}" }, { toolCallId: id, toolName: "exec" });
          if (next() < 0.8) add(sid, "toolResult", "done", { toolCallId: id, toolName: "exec" });
        }
      }
      const log = logs[sid]!;
      // the newest 10..40 messages; sometimes the newest few left out (a re-run's window)
      const size = 10 + Math.floor(next() * 30);
      const end = next() < 0.1 ? Math.max(1, log.length - Math.floor(next() * 4)) : log.length;
      let window = log.slice(Math.max(0, end - size), end);
      // a message filtered out of the middle (a re-run's own later messages, with others after them)
      if (next() < 0.1 && window.length > 2) window.splice(1 + Math.floor(next() * (window.length - 2)), 1);
      if (next() < 0.2) window = structuredClone(window); // read from disk: fresh objects
      const got = windowUnits(window);
      const sources: TranscriptMessage[][] = [];
      const want = toUnits(window, sources);
      expect(got.units).toEqual(want);
      expect(got.costs).toEqual(want.map(byJson));
      for (let i = 0; i < got.units.length; i++) if (got.units[i] !== want[i]) reused++;
      if (step % 50 === 0) earlier.push({ units: got.units, want: structuredClone(want) });
    }
    // units were carried (not rebuilt) for most of the windows
    expect(reused).toBeGreaterThan(5000);
    // and nothing built later changed a unit handed out earlier
    for (const e of earlier) expect(e.units).toEqual(e.want);
  });

  it("keeps reusing a share of the windows when sessions served in turn outgrow what is kept", () => {
    // 256 sessions of 100-message windows served round-robin: 25,600 messages against 16,384 kept.
    // Dropping the least recently built memo would drop each one just before its session came back.
    const logs = new Map<string, TranscriptMessage[]>();
    const last = new Map<string, Set<unknown>>();
    let reused = 0;
    for (let round = 0; round < 4; round++) {
      for (let k = 0; k < 256; k++) {
        const sid = `cycle${k}`;
        const log = logs.get(sid) ?? [];
        logs.set(sid, log);
        const add = (role: "user" | "assistant") =>
          log.push({
            id: `${sid}-${log.length}`,
            sessionId: sid,
            role,
            content: `m${log.length}`,
            timestamp: 1,
          });
        if (log.length === 0) for (let i = 0; i < 98; i++) add(i % 2 === 0 ? "user" : "assistant");
        add("user");
        add("assistant");
        const window = log.slice(-100);
        const got = windowUnits(window);
        // the window slid by one turn: its middle units are the last window's, when carried over
        if (round > 0 && last.get(sid)?.has(got.units[50])) reused++;
        last.set(sid, new Set(got.units));
      }
    }
    // random dropping carries about a third of the 768 later windows (220-300 in 20 trials);
    // least-recent-first carried none. The bound is far below the spread, so it is not flaky.
    expect(reused).toBeGreaterThan(100);
  });

  it("stays right for more sessions and longer windows than are kept (memos dropped and built again)", () => {
    const logs = new Map<string, TranscriptMessage[]>();
    for (let round = 0; round < 6; round++) {
      for (let k = 0; k < 40; k++) {
        const sid = `many${k}`;
        const log = logs.get(sid) ?? [];
        logs.set(sid, log);
        for (let i = 0; i < 60; i++) {
          const role = i % 2 === 0 ? "user" : "assistant";
          log.push({
            id: `${sid}-${log.length}`,
            sessionId: sid,
            role,
            content: `m${round}.${i}`,
            timestamp: 1,
          });
        }
        const window = log.slice(-400); // 40 sessions × up to 360 messages: far past what is kept
        const got = windowUnits(window);
        const want = toUnits(window);
        expect(got.units).toEqual(want);
        expect(got.costs).toEqual(want.map(byJson));
      }
    }
  });
});
