import { describe, expect, it } from "vitest";
import { formatDuration } from "../../../src/policy/status-card.js";
import type { TranscriptMessage } from "../../../src/store/types.js";
import { formatAnnounce, formatTokens, pickResult } from "../../../src/subagents/announce-text.js";

const msg = (role: TranscriptMessage["role"], content: unknown): TranscriptMessage => ({
  id: Math.random().toString(36),
  sessionId: "s",
  role,
  content,
  timestamp: 0,
});

describe("formatting", () => {
  it("durations", () => {
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(59_400)).toBe("59s");
    expect(formatDuration(252_000)).toBe("4m12s");
    expect(formatDuration(2 * 3600_000 + 5 * 60_000)).toBe("2h05m");
  });
  it("token counts", () => {
    expect(formatTokens(950)).toBe("950");
    expect(formatTokens(1200)).toBe("1.2k");
    expect(formatTokens(2000)).toBe("2k");
    expect(formatTokens(3_400_000)).toBe("3.4m");
  });
});

describe("pickResult", () => {
  it("prefers the final reply", () => {
    expect(pickResult(" final ", [msg("assistant", "older")])).toEqual({ text: "final", source: "reply" });
  });
  it("falls back to the last assistant text, then the last tool result when that text is empty", () => {
    expect(pickResult("", [msg("assistant", "partial"), msg("toolResult", "r")])).toEqual({
      text: "partial",
      source: "assistant",
    });
    expect(
      pickResult("", [msg("toolResult", "r1"), msg("toolResult", '{"x":1}'), msg("assistant", "")]),
    ).toEqual({
      text: '{"x":1}',
      source: "toolResult",
    });
    expect(pickResult("", [])).toEqual({ text: "", source: "none" });
  });
});

describe("formatAnnounce", () => {
  it("has Status, Result, Notes and a Stats line with cost only when priced", () => {
    const run = {
      runId: "r",
      sessionKey: "k",
      agentId: "main",
      status: "ok" as const,
      createdAt: 0,
      startedAt: 1000,
      endedAt: 6000,
      usage: { input: 800, output: 400, cost: 0.0123 },
    };
    const text = formatAnnounce({
      status: "ok",
      result: { text: "42", source: "reply" },
      label: "meaning",
      run,
      childKey: "agent:main:subagent:u",
      sessionId: "sid",
      transcriptPath: "/t.jsonl",
    });
    expect(text.split("\n")).toEqual([
      "[Sub-agent completion] meaning",
      "Status: ok",
      "Result: 42",
      "Notes: - (none)",
      "Stats: runtime 5s • tokens 1.2k (in 800 / out 400) • cost $0.0123 • sessionKey agent:main:subagent:u • sessionId sid • transcript /t.jsonl",
    ]);
    const unpriced = formatAnnounce({
      status: "timeout",
      result: { text: "", source: "none" },
      label: "x",
      error: "run timed out",
      run: { ...run, usage: { input: 1, output: 2 } },
      childKey: "k",
    });
    expect(unpriced).toContain("Status: timeout");
    expect(unpriced).toContain("Result: (no output)");
    expect(unpriced).toContain("Notes: run timed out");
    expect(unpriced).not.toContain("cost");
    expect(unpriced).toContain("sessionId n/a");
  });
});

describe("formatAnnounce: a child reply that already has sections", () => {
  const base = { label: "job", childKey: "agent:main:subagent:u" };
  const lines = (text: string) => text.split("\n");
  const count = (text: string, prefix: string) => lines(text).filter((l) => l.startsWith(prefix)).length;

  it.each([
    [
      "Status/Result/Notes: the child's Status is ignored, Result and Notes kept",
      "ok" as const,
      "Status: error\nResult: found 3 files\nNotes: one was empty",
      "Result: found 3 files",
      "Notes: one was empty",
    ],
    [
      "the runtime outcome wins and its error comes first in Notes",
      "timeout" as const,
      "Status: ok\nResult: partial list\nNotes: stopped early",
      "Result: partial list",
      "Notes: run timed out; stopped early",
    ],
    [
      "a multi-line Result and an empty Notes section",
      "ok" as const,
      "Here is the summary.\nResult:\n- a\n- b\nNotes: - (none)",
      "Result: Here is the summary.\n- a\n- b",
      "Notes: - (none)",
    ],
    [
      "markdown-bold headers",
      "ok" as const,
      "**Status:** done\n**Result:** 42",
      "Result: 42",
      "Notes: - (none)",
    ],
    [
      "plain text stays the result",
      "ok" as const,
      "just an answer",
      "Result: just an answer",
      "Notes: - (none)",
    ],
  ])("%s", (_name, status, reply, result, notes) => {
    const text = formatAnnounce({
      ...base,
      status,
      ...(status !== "ok" ? { error: "run timed out" } : {}),
      result: { text: reply, source: "reply" },
    });
    expect(count(text, "Status:")).toBe(1);
    expect(count(text, "Notes:")).toBe(1);
    expect(count(text, "Result:")).toBe(1);
    expect(text).toContain(`Status: ${status}`);
    expect(text).toContain(result);
    expect(text).toContain(notes);
  });
});
