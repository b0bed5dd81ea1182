import { formatDuration } from "../policy/status-card.js";
import type { RunRecord, TranscriptMessage } from "../store/types.js";

/**
 * The text of a sub-agent completion announce (SEMANTICS §3): a header naming the sub-agent, then
 * `Status:` (from the run outcome), `Result:`, `Notes:` and a `Stats:` line. Pure functions.
 */

/** Longest `Result:` kept in an announce; the full text stays in the child's transcript. */
export const RESULT_MAX_CHARS = 16_000;
const HEADER_LABEL_CHARS = 80;

export interface PickedResult {
  text: string;
  /** Where it came from: the final reply, an earlier assistant text, a tool result, or nothing. */
  source: "reply" | "assistant" | "toolResult" | "none";
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (content && typeof content === "object" && "text" in content && typeof content.text === "string")
    return content.text;
  return content === undefined || content === null ? "" : JSON.stringify(content);
}

/**
 * The child's last assistant text of the run, or its last tool result when that text is empty.
 * `finalReply` (the run record's reply) wins when it is not empty.
 */
export function pickResult(finalReply: string, runMessages: readonly TranscriptMessage[]): PickedResult {
  if (finalReply.trim() !== "") return { text: finalReply.trim(), source: "reply" };
  for (let i = runMessages.length - 1; i >= 0; i--) {
    const m = runMessages[i];
    if (m?.role !== "assistant") continue;
    const t = textOf(m.content).trim();
    if (t !== "") return { text: t, source: "assistant" };
    break; // the newest assistant message is empty: fall back to the tool results
  }
  for (let i = runMessages.length - 1; i >= 0; i--) {
    const m = runMessages[i];
    if (m?.role === "toolResult") return { text: textOf(m.content).trim(), source: "toolResult" };
  }
  return { text: "", source: "none" };
}

/** `950`, `1.2k`, `3.4m`. */
export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  const [v, unit] = n < 1_000_000 ? [n / 1000, "k"] : [n / 1_000_000, "m"];
  return `${v.toFixed(1).replace(/\.0$/, "")}${unit}`;
}

export interface AnnounceInput {
  status: "ok" | "error" | "timeout" | "aborted";
  result: PickedResult;
  label: string;
  error?: string;
  run?: RunRecord;
  childKey: string;
  sessionId?: string;
  transcriptPath?: string;
}

export function statsLine(
  input: Pick<AnnounceInput, "run" | "childKey" | "sessionId" | "transcriptPath">,
): string {
  const { run } = input;
  const parts: string[] = [];
  const start = run?.startedAt ?? run?.createdAt;
  parts.push(
    `runtime ${start !== undefined && run?.endedAt !== undefined ? formatDuration(run.endedAt - start) : "n/a"}`,
  );
  const u = run?.usage;
  parts.push(
    u
      ? `tokens ${formatTokens(u.input + u.output)} (in ${formatTokens(u.input)} / out ${formatTokens(u.output)})`
      : "tokens n/a",
  );
  if (u?.cost !== undefined && u.cost > 0) parts.push(`cost $${u.cost.toFixed(4)}`);
  parts.push(`sessionKey ${input.childKey}`);
  parts.push(`sessionId ${input.sessionId ?? "n/a"}`);
  parts.push(`transcript ${input.transcriptPath ?? "n/a"}`);
  return `Stats: ${parts.join(" • ")}`;
}

const SECTION_RE = /^[ \t]*[*_]{0,2}(status|result|notes)[*_]{0,2}[ \t]*:[*_]{0,2}[ \t]?(.*)$/i;
const EMPTY_NOTES_RE = /^[-–•*\s]*(?:\(none\)|none|n\/a)?\s*$/i;

/**
 * A child reply that already has `Status:` / `Result:` / `Notes:` sections (SEMANTICS §3): its
 * Status is dropped (the runtime's outcome is the status), its Result becomes the result and its
 * Notes are merged, so the announce never holds a section twice. Text without sections is all result.
 */
export function parseChildSections(text: string): { result: string; notes: string[] } {
  const lines = text.split("\n");
  if (!lines.some((l) => SECTION_RE.test(l))) return { result: text, notes: [] };
  const parts: Record<"status" | "result" | "notes" | "pre", string[]> = {
    pre: [],
    status: [],
    result: [],
    notes: [],
  };
  let cur: keyof typeof parts = "pre";
  for (const line of lines) {
    const m = SECTION_RE.exec(line);
    if (m) {
      cur = (m[1] ?? "result").toLowerCase() as "status" | "result" | "notes";
      if (m[2]?.trim()) parts[cur].push(m[2]);
      continue;
    }
    parts[cur].push(line);
  }
  const result = [...parts.pre, ...parts.result].join("\n").trim();
  const notes = parts.notes.join("\n").trim();
  return { result, notes: EMPTY_NOTES_RE.test(notes) ? [] : [notes] };
}

export function formatAnnounce(input: AnnounceInput): string {
  const label =
    input.label.length > HEADER_LABEL_CHARS
      ? `${input.label.slice(0, HEADER_LABEL_CHARS - 1)}…`
      : input.label;
  const child = parseChildSections(input.result.text);
  let result = child.result;
  if (result.length > RESULT_MAX_CHARS)
    result = `${result.slice(0, RESULT_MAX_CHARS)}\n…(truncated; the full text is in the sub-agent's transcript)`;
  const notes: string[] = [];
  if (input.status !== "ok") notes.push(input.error ?? `run ended with status ${input.status}`);
  if (input.result.source === "toolResult")
    notes.push("the sub-agent gave no final text; Result is its last tool result");
  notes.push(...child.notes);
  return [
    `[Sub-agent completion] ${label}`,
    `Status: ${input.status}`,
    `Result: ${result || "(no output)"}`,
    `Notes: ${notes.length ? notes.join("; ") : "- (none)"}`,
    statsLine(input),
  ].join("\n");
}

const NAMED_MEDIA_RE = /sha256:[0-9a-f]{64}/g;
/** Most files one announce carries. */
export const ANNOUNCE_MAX_FILES = 10;

/**
 * The files a child's final reply names by `mediaId` (API.md §8.2), in the order named, kept only
 * when the child's own transcript already held the id before the reply: in a media part of a line,
 * or in a line it did not write itself (a user message, a tool result). A child cannot make a
 * guessed or remembered id travel: an id that only its own words hold is ignored.
 */
export function namedMediaIds(reply: string, transcript: readonly TranscriptMessage[]): string[] {
  const named = [...new Set(reply.match(NAMED_MEDIA_RE) ?? [])];
  if (named.length === 0) return [];
  const held = new Set<string>();
  for (const m of transcript) {
    if (Array.isArray(m.content))
      for (const p of m.content)
        if (p && typeof p === "object" && typeof (p as { mediaId?: unknown }).mediaId === "string")
          held.add((p as { mediaId: string }).mediaId);
    if (m.role === "user" || m.role === "toolResult") {
      const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "");
      for (const id of text.match(NAMED_MEDIA_RE) ?? []) held.add(id);
    }
  }
  return named.filter((id) => held.has(id)).slice(0, ANNOUNCE_MAX_FILES);
}
