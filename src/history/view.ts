import { isPlaceholder, maskSecret, SECRET_KEY_RE } from "../redact.js";
import type { MessageRole, Provenance, TranscriptMessage } from "../store/types.js";
import { HISTORY_MAX_BYTES, MESSAGE_TOO_LARGE, sanitizeText } from "./bound.js";

/**
 * The `sessions_history` safe view (SEMANTICS.md §3): assistant text normalised, credentials
 * redacted, text fields cut, internals dropped, the whole view bounded. Pure functions.
 */

const MAX_DEPTH = 32;

export interface SafeMessage {
  id: string;
  role: MessageRole;
  content: unknown;
  timestamp: number;
  provenance?: Provenance;
  toolCallId?: string;
  toolName?: string;
  model?: string;
  /** On a `compaction` message: the range it summarises and the prompt sizes before/after. */
  compaction?: { fromId: string; toId: string; tokensBefore: number; tokensAfter: number };
}

/** The marker a compaction shows with in history: one message, the summary after it. */
export const COMPACTION_MARKER = "[Compaction: earlier messages summarised]";

/** A compaction line's content `{ summary, fromId, toId, tokensBefore, tokensAfter }`, or null. */
function compactionContent(
  v: unknown,
): { summary: string; fromId: string; toId: string; tokensBefore: number; tokensAfter: number } | null {
  const o = asRecord(v);
  if (!o) return null;
  const { summary, fromId, toId, tokensBefore, tokensAfter } = o;
  if (typeof summary !== "string" || typeof fromId !== "string" || typeof toId !== "string") return null;
  return {
    summary,
    fromId,
    toId,
    tokensBefore: typeof tokensBefore === "number" ? tokensBefore : 0,
    tokensAfter: typeof tokensAfter === "number" ? tokensAfter : 0,
  };
}

/** A type alias (not an interface) so it is assignable to `Record<string, unknown>` tool results. */
export type HistoryView = {
  messages: SafeMessage[];
  /** droppedMessages || contentTruncated. */
  truncated: boolean;
  /** Older messages left out to fit maxBytes. */
  droppedMessages: boolean;
  /** A text was cut, image data omitted, or a message replaced because it was too large alone. */
  contentTruncated: boolean;
  contentRedacted: boolean;
  /** UTF-8 size of JSON.stringify(messages). */
  bytes: number;
};

/** Usage, cost and provider internals never leave through history. */
const DROP_KEYS = new Set([
  "usage",
  "cost",
  "thinkingSignature",
  "signature",
  "providerData",
  "providerMetadata",
  "providerOptions",
  "encrypted_content",
  "raw",
  "api",
  "provider",
]);
const THINKING_BLOCKS = new Set(["thinking", "redacted_thinking", "reasoning"]);
const TOOL_BLOCKS = new Set(["toolCall", "tool_use", "toolResult", "tool_result", "function_call"]);

interface Ctx {
  includeTools: boolean;
  redacted: boolean;
  truncated: boolean;
}

function base64Bytes(data: string): number {
  const b64 = data.startsWith("data:") ? data.slice(data.indexOf(",") + 1) : data;
  const clean = b64.replace(/\s+/g, "");
  const pad = clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - pad);
}

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

const DATA_URL_RE = /^data:([^;,]*)[^,]*,/;

/** OpenAI-style image blocks (`image_url: { url }` or `image_url: "…"`) carrying a data URL. */
function imageUrlBlock(obj: Record<string, unknown>): Record<string, unknown> | undefined {
  const url = typeof obj.image_url === "string" ? obj.image_url : asRecord(obj.image_url)?.url;
  if (typeof url !== "string") return undefined;
  const m = DATA_URL_RE.exec(url);
  if (!m) return undefined;
  return { type: "image", ...(m[1] ? { mimeType: m[1] } : {}), omitted: true, bytes: base64Bytes(url) };
}

function imageBlock(obj: Record<string, unknown>): Record<string, unknown> | undefined {
  if (obj.type === "image_url" || obj.type === "input_image") return imageUrlBlock(obj);
  if (obj.type !== "image") return undefined;
  const source = asRecord(obj.source);
  const data =
    typeof obj.data === "string" ? obj.data : typeof source?.data === "string" ? source.data : undefined;
  if (data === undefined) return undefined;
  const mimeType = obj.mimeType ?? obj.media_type ?? source?.media_type;
  return {
    type: "image",
    ...(typeof mimeType === "string" ? { mimeType } : {}),
    omitted: true,
    bytes: base64Bytes(data),
  };
}

function text(value: string, ctx: Ctx, strip: boolean): string {
  const r = sanitizeText(value, { strip });
  if (r.redacted) ctx.redacted = true;
  if (r.truncated) ctx.truncated = true;
  return r.text;
}

/** undefined = drop this value. */
function sanitizeValue(value: unknown, ctx: Ctx, depth: number, strip: boolean): unknown {
  if (typeof value === "string") return text(value, ctx, strip);
  if (value === null || typeof value === "number" || typeof value === "boolean") return value;
  if (typeof value !== "object") return value === undefined ? undefined : String(value);
  if (depth >= MAX_DEPTH) {
    ctx.truncated = true;
    return "[omitted: nested too deep]";
  }
  if (Array.isArray(value)) {
    return value.map((v) => sanitizeValue(v, ctx, depth + 1, strip)).filter((v) => v !== undefined);
  }
  const obj = value as Record<string, unknown>;
  const type = typeof obj.type === "string" ? obj.type : undefined;
  if (type !== undefined && THINKING_BLOCKS.has(type)) return undefined;
  if (type !== undefined && TOOL_BLOCKS.has(type) && !ctx.includeTools) return undefined;
  const image = imageBlock(obj);
  if (image) {
    ctx.truncated = true;
    return image;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (DROP_KEYS.has(k)) continue;
    if (typeof v === "string" && SECRET_KEY_RE.test(k) && !isPlaceholder(v)) {
      ctx.redacted = true;
      out[k] = maskSecret(v);
      continue;
    }
    // Only assistant prose is normalised: `text` fields, not tool arguments or ids.
    const s = sanitizeValue(v, ctx, depth + 1, strip && k === "text");
    if (s !== undefined) out[k] = s;
  }
  return out;
}

function sanitizeProvenance(p: Provenance, ctx: Ctx): Provenance {
  const out: Provenance = { kind: p.kind };
  for (const k of [
    "sourceSessionKey",
    "sourceRunId",
    "sourceChannel",
    "sourceTool",
    "channel",
    "senderId",
    "senderName",
  ] as const) {
    const v = p[k];
    if (typeof v === "string") out[k] = text(v, ctx, false);
  }
  return out;
}

function sanitizeMessage(m: TranscriptMessage, ctx: Ctx): SafeMessage {
  const c = m.role === "compaction" ? compactionContent(m.content) : null;
  if (c) {
    const { summary, ...range } = c;
    return {
      id: m.id,
      role: m.role,
      content: text(`${COMPACTION_MARKER}\n${summary}`, ctx, false),
      timestamp: m.timestamp,
      compaction: { ...range, fromId: text(range.fromId, ctx, false), toId: text(range.toId, ctx, false) },
    };
  }
  const out: SafeMessage = {
    id: m.id,
    role: m.role,
    content: sanitizeValue(m.content, ctx, 0, m.role === "assistant") ?? "",
    timestamp: m.timestamp,
  };
  if (m.provenance) out.provenance = sanitizeProvenance(m.provenance, ctx);
  if (m.toolCallId !== undefined) out.toolCallId = m.toolCallId;
  if (m.toolName !== undefined) out.toolName = m.toolName;
  if (m.model !== undefined) out.model = m.model;
  return out;
}

const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), "utf8");

/**
 * The bounded, safe view of transcript messages (oldest first in, oldest first out). Keeps the
 * newest messages whose JSON array fits `maxBytes`; one message too large even alone is replaced
 * by MESSAGE_TOO_LARGE.
 */
export function buildHistoryView(
  messages: readonly TranscriptMessage[],
  opts: { includeTools: boolean; maxBytes?: number },
): HistoryView {
  const maxBytes = opts.maxBytes ?? HISTORY_MAX_BYTES;
  const ctx: Ctx = { includeTools: opts.includeTools, redacted: false, truncated: false };
  const selected = opts.includeTools
    ? messages
    : messages.filter((m) => m.role !== "toolCall" && m.role !== "toolResult");

  const safe: Array<{ msg: SafeMessage; size: number }> = [];
  for (const m of selected) {
    const local: Ctx = { ...ctx, redacted: false, truncated: false };
    let msg = sanitizeMessage(m, local);
    let size = jsonBytes(msg);
    if (local.redacted) ctx.redacted = true;
    if (size + 2 > maxBytes) {
      msg = { id: m.id, role: m.role, content: MESSAGE_TOO_LARGE, timestamp: m.timestamp };
      size = jsonBytes(msg);
      ctx.truncated = true;
    } else if (local.truncated) {
      ctx.truncated = true;
    }
    safe.push({ msg, size });
  }

  // Newest suffix that fits: "[" + items joined by "," + "]".
  let bytes = 2;
  let first = safe.length;
  while (first > 0) {
    const size = (safe[first - 1]?.size ?? 0) + (first < safe.length ? 1 : 0);
    if (bytes + size > maxBytes) break;
    bytes += size;
    first--;
  }
  const kept = safe.slice(first).map((s) => s.msg);
  const droppedMessages = first > 0;
  return {
    messages: kept,
    truncated: droppedMessages || ctx.truncated,
    droppedMessages,
    contentTruncated: ctx.truncated,
    contentRedacted: ctx.redacted,
    bytes: jsonBytes(kept),
  };
}
