import type { TranscriptMessage, TranscriptRef, TranscriptStore } from "../store/types.js";
import { sanitizeText } from "./bound.js";

/**
 * Row previews of `sessions_list` (SEMANTICS §3): a title derived from the first user message and
 * the newest user/assistant message. Each reads a bounded part of one transcript (its head or its
 * last few lines), so the cost is per returned row, never per stored session.
 */

export const DERIVED_TITLE_MAX_CHARS = 60;
export const LAST_MESSAGE_MAX_CHARS = 200;
/** Messages and bytes looked at from the head for a title. */
const TITLE_HEAD_MESSAGES = 8;
const TITLE_HEAD_BYTES = 16 * 1024;
/** Newest messages looked at for the preview (tool messages are skipped by the read). */
const LAST_TAIL_MESSAGES = 4;
/** A line envelope the runtime puts before routed messages; not part of a title. */
const ENVELOPE_RE = /^\[Inter-session message\][^\n]*\n(?:[^\n]*\n)?\n?/;

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((b) =>
        b && typeof b === "object" && typeof (b as { text?: unknown }).text === "string"
          ? (b as { text: string }).text
          : "",
      )
      .filter((t) => t !== "")
      .join(" ");
  }
  if (content && typeof content === "object" && typeof (content as { text?: unknown }).text === "string") {
    return (content as { text: string }).text;
  }
  return "";
}

/** Sanitised (assistant scaffolding stripped, secrets redacted), one line, at most `max` chars. */
function preview(m: TranscriptMessage, max: number): string {
  const raw = textOf(m.content).replace(ENVELOPE_RE, "");
  const { text } = sanitizeText(raw, { strip: m.role === "assistant" });
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1).trimEnd()}…` : line;
}

/** The first user message with text, as a title; undefined when there is none in the head. */
export async function derivedTitle(
  transcripts: TranscriptStore,
  ref: TranscriptRef,
): Promise<string | undefined> {
  const head = await transcripts.readHead(ref, { limit: TITLE_HEAD_MESSAGES, maxBytes: TITLE_HEAD_BYTES });
  for (const m of head) {
    if (m.role !== "user") continue;
    const t = preview(m, DERIVED_TITLE_MAX_CHARS);
    if (t !== "") return t;
  }
  return undefined;
}

/** The newest user or assistant message with text. */
export async function lastMessage(
  transcripts: TranscriptStore,
  ref: TranscriptRef,
): Promise<{ role: "user" | "assistant"; text: string; at: number } | undefined> {
  const tail = await transcripts.readTail(ref, { limit: LAST_TAIL_MESSAGES, includeTools: false });
  for (let i = tail.length - 1; i >= 0; i--) {
    const m = tail[i];
    if (!m || (m.role !== "user" && m.role !== "assistant")) continue;
    const text = preview(m, LAST_MESSAGE_MAX_CHARS);
    if (text !== "") return { role: m.role, text, at: m.timestamp };
  }
  return undefined;
}
