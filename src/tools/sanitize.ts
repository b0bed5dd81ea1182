import type { MessageRole, Provenance, TranscriptMessage } from "../store/types.js";

/**
 * The `sessions_history` safe view (SEMANTICS.md §3): assistant text normalised, credentials
 * redacted, text fields cut, internals dropped, the whole view bounded. Pure functions; the
 * redaction part (`redactSecrets`) is shared with logging and other outputs.
 */

export const HISTORY_TEXT_LIMIT_CHARS = 4000;
export const HISTORY_MAX_BYTES = 80 * 1024;
/** Appended to a cut text field; the result including it is at most HISTORY_TEXT_LIMIT_CHARS long. */
export const TRUNCATION_MARKER = "\n…(truncated)";
export const MESSAGE_TOO_LARGE = "[sessions_history omitted: message too large]";
/** Huge fields are processed through this prefix only (linear cost, no pathological inputs). */
const WORK_WINDOW_CHARS = 64 * 1024;
const MAX_DEPTH = 32;

// ─── redaction ───────────────────────────────────────────────────────────────────────────────

/** Long secrets keep their first 6 and last 4 characters; short ones become `***`. */
export function maskSecret(secret: string): string {
  const chars = Array.from(secret);
  return chars.length >= 18 ? `${chars.slice(0, 6).join("")}…${chars.slice(-4).join("")}` : "***";
}

/** Values that are already masked or are references, not secrets. */
function isPlaceholder(v: string): boolean {
  return v === "" || v === "***" || v.includes("…") || v.startsWith("$");
}

/** Names whose quoted value is a secret (JSON fields, `x = "…"`): apiKey, api_key, token, password, … */
const SECRET_NAME = String.raw`[\w.-]*?(?:api[_-]?key|access[_-]?key|private[_-]?key|secret[_-]?key|token|secret|password|passwd)`;
/** Env-style `NAME=value`: the names above, or anything ending in `_KEY` / `-KEY` / `.key`, or `key`. */
const ENV_NAME = String.raw`(?:${SECRET_NAME}|(?:[\w.-]*[_.-])?key)`;

interface RedactRule {
  re: RegExp;
  /** Replacement for one match; `hit()` records that something was redacted. */
  replace: (hit: () => void, m: string, ...groups: string[]) => string;
}

const maskGroup =
  (
    before: (g: string[]) => string,
    value: (g: string[]) => string,
    after: (g: string[]) => string = () => "",
  ) =>
  (hit: () => void, m: string, ...g: string[]): string => {
    const v = value(g);
    if (isPlaceholder(v)) return m;
    hit();
    return `${before(g)}${maskSecret(v)}${after(g)}`;
  };

const PREFIXED_TOKEN = new RegExp(
  [
    "sk-[A-Za-z0-9_-]{12,}",
    "gh[pousr]_[A-Za-z0-9]{16,}",
    "github_pat_[A-Za-z0-9_]{20,}",
    "xox[abprs]-[A-Za-z0-9-]{10,}",
    "xapp-[A-Za-z0-9-]{10,}",
    "AIza[0-9A-Za-z_-]{20,}",
    "gsk_[A-Za-z0-9]{16,}",
    "pplx-[A-Za-z0-9]{16,}",
    "npm_[A-Za-z0-9]{16,}",
  ]
    .map((p) => String.raw`(?<![\w-])${p}`)
    .join("|"),
  "g",
);

const RULES: readonly RedactRule[] = [
  {
    // PEM private keys, also when the END line was cut off.
    re: /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g,
    replace: (hit, _m, kind = "") => {
      hit();
      return `-----BEGIN ${kind}PRIVATE KEY-----\n…redacted…\n-----END ${kind}PRIVATE KEY-----`;
    },
  },
  {
    // Quoted values after a secret-ish name: "apiKey": "…", token = '…', PASSWORD="…".
    re: new RegExp(
      String.raw`(?<![\w.-])(${SECRET_NAME}["']?\s*[:=]\s*)(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)')`,
      "gi",
    ),
    replace: (hit, m, head = "", dq, sq) => {
      const quote = dq !== undefined ? '"' : "'";
      const v = dq ?? sq ?? "";
      if (isPlaceholder(v)) return m;
      hit();
      return `${head}${quote}${maskSecret(v)}${quote}`;
    },
  },
  {
    // Env-style assignments: OPENAI_API_KEY=…, DB_PASSWORD=…, ?key=… (no spaces around `=`).
    re: new RegExp(String.raw`(?<![\w.-])(${ENV_NAME}=)([^\s"'&;,<>]+)`, "gi"),
    replace: maskGroup(
      (g) => g[0] ?? "",
      (g) => g[1] ?? "",
    ),
  },
  {
    // CLI flags: --api-key X, --token=X, --password 'X'.
    re: /(--(?:api[_-]?key|token|secret|password|passwd)(?:\s+|=))(["']?)([^\s"']+)\2/gi,
    replace: maskGroup(
      (g) => `${g[0] ?? ""}${g[1] ?? ""}`,
      (g) => g[2] ?? "",
      (g) => g[1] ?? "",
    ),
  },
  {
    // Bearer tokens (Authorization headers and prose); plain words like "Bearer tokens" are not secrets.
    re: /\b(Bearer\s+)([A-Za-z0-9._~+/-]+=*)/gi,
    replace: (hit, m, head = "", token = "") => {
      if (token.length < 8 || (!/\d/.test(token) && token.length < 24) || isPlaceholder(token)) return m;
      hit();
      return `${head}${maskSecret(token)}`;
    },
  },
  {
    re: PREFIXED_TOKEN,
    replace: (hit, m) => {
      hit();
      return maskSecret(m);
    },
  },
  {
    // Telegram bot tokens: <bot id>:<secret>.
    re: /(?<![\w:])\d{6,12}:[A-Za-z0-9_-]{25,}(?![\w-])/g,
    replace: (hit, m) => {
      hit();
      return maskSecret(m);
    },
  },
];

/** Redacts every credential form SEMANTICS §3 lists; `redacted` says whether anything changed. */
export function redactText(text: string): { text: string; redacted: boolean } {
  let redacted = false;
  const hit = () => {
    redacted = true;
  };
  let out = text;
  for (const rule of RULES) {
    rule.re.lastIndex = 0;
    out = out.replace(rule.re, (m: string, ...args: unknown[]) => {
      const groups = args.slice(0, -2).map((g) => (typeof g === "string" ? g : undefined)) as string[];
      return rule.replace(hit, m, ...groups);
    });
  }
  return { text: out, redacted };
}

/** For logs and any other output: the text with credentials masked. */
export function redactSecrets(text: string): string {
  return redactText(text).text;
}

/** Object keys whose string value is a secret wherever it appears in structured content. */
const SECRET_KEY_RE = new RegExp(`^${SECRET_NAME}$|^authorization$`, "i");

// ─── assistant text normalisation ────────────────────────────────────────────────────────────

/**
 * Replaces fenced blocks and inline code spans with placeholders so stripping never touches
 * them; `restore` puts them back. Code inside a stripped block (e.g. thinking) goes with it.
 */
function protectCode(text: string): { masked: string; restore: (s: string) => string } {
  const spans: string[] = [];
  let nonce = "c";
  while (text.includes(`\uE000${nonce}`)) nonce += "c";
  const hold = (s: string) => {
    spans.push(s);
    return `\uE000${nonce}${spans.length - 1}\uE001`;
  };
  const lines = text.split(/(?<=\n)/);
  let out = "";
  let plain = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const open = /^ {0,3}(`{3,}|~{3,})([^\n]*)/.exec(line);
    // A backtick fence's info string may not contain backticks (CommonMark).
    if (!open || (open[1]?.[0] === "`" && open[2]?.includes("`"))) {
      plain += line;
      continue;
    }
    out += protectInline(plain, hold);
    plain = "";
    const fence = open[1] ?? "```";
    let block = line;
    let closed = false;
    while (++i < lines.length) {
      const l = lines[i] ?? "";
      block += l;
      const close = /^ {0,3}(`{3,}|~{3,})[ \t]*\n?$/.exec(l);
      if (close && close[1]?.[0] === fence[0] && (close[1]?.length ?? 0) >= fence.length) {
        closed = true;
        break;
      }
    }
    // The newline after a closing fence stays outside, so whitespace clean-up can see it.
    out += closed && block.endsWith("\n") ? `${hold(block.slice(0, -1))}\n` : hold(block);
  }
  out += protectInline(plain, hold);
  const restoreRe = new RegExp(`\uE000${nonce}(\\d+)\uE001`, "g");
  return { masked: out, restore: (s) => s.replace(restoreRe, (_m, n: string) => spans[Number(n)] ?? "") };
}

/** Inline code: a backtick run closed by the next run of the same length (CommonMark). */
function protectInline(s: string, hold: (span: string) => string): string {
  let out = "";
  let i = 0;
  const unmatched = new Set<number>();
  while (i < s.length) {
    const j = s.indexOf("`", i);
    if (j === -1) break;
    let k = j;
    while (s[k] === "`") k++;
    const run = k - j;
    let close = -1;
    if (!unmatched.has(run)) {
      let from = k;
      for (;;) {
        const c = s.indexOf("`", from);
        if (c === -1) break;
        let e = c;
        while (s[e] === "`") e++;
        if (e - c === run) {
          close = c;
          break;
        }
        from = e;
      }
      // No closer of this length later on: later runs of the same length cannot close either.
      if (close === -1) unmatched.add(run);
    }
    if (close === -1) {
      out += s.slice(i, k);
      i = k;
      continue;
    }
    out += s.slice(i, j) + hold(s.slice(j, close + run));
    i = close + run;
  }
  return out + s.slice(i);
}

interface TagFamily {
  names: string;
  /** An orphan closing tag means everything before it was this kind of block (thinking). */
  orphanCloseSwallowsPrefix: boolean;
}

const TAG_FAMILIES: readonly TagFamily[] = [
  { names: "think|thinking|thought|antthinking", orphanCloseSwallowsPrefix: true },
  { names: "relevant[-_]memories", orphanCloseSwallowsPrefix: false },
  { names: "tool_calls|tool_call|function_calls|function_call|invoke", orphanCloseSwallowsPrefix: false },
];

const FAMILY_RES = TAG_FAMILIES.map((f) => ({
  family: f,
  open: new RegExp(String.raw`<(?:[\w-]+:)?(?:${f.names})(?![\w-])[^<>]*>`, "gi"),
  close: new RegExp(String.raw`<\/(?:[\w-]+:)?(?:${f.names})\s*>`, "gi"),
}));

/**
 * Removes open…close blocks of one family, and an unterminated block to the end. Scans forward
 * once (a regex with a lazy body would rescan the rest of the text for every unclosed open tag).
 */
function stripFamily(t: string, f: (typeof FAMILY_RES)[number]): string {
  let out = "";
  let pos = 0;
  for (;;) {
    f.open.lastIndex = pos;
    const o = f.open.exec(t);
    if (!o) break;
    out += t.slice(pos, o.index);
    f.close.lastIndex = o.index + o[0].length;
    const c = f.close.exec(t);
    if (!c) return out;
    pos = c.index + c[0].length;
  }
  out += t.slice(pos);
  // Orphan closing tags: for thinking, everything before the last one was thinking.
  f.close.lastIndex = 0;
  if (!f.family.orphanCloseSwallowsPrefix) return out.replace(f.close, "");
  let cut = -1;
  for (const m of out.matchAll(f.close)) cut = m.index + m[0].length;
  return cut === -1 ? out : out.slice(cut);
}

const MARKER_RE =
  /\[(?:Tool Call:[^\n]*(?:\n[ \t]*Arguments:[^\n]*)?|Tool Result\b[^\n]*|Historical context\b[^\n]*)/gi;
const CONTROL_TOKEN_RE = /<[|｜][^|｜\n<>]{0,100}[|｜]>/g;

/**
 * Removes thinking, memory scaffolding, plain-text tool-call XML (also unterminated), downgraded
 * tool markers and leaked control tokens from assistant text, leaving fenced and inline code as is.
 */
export function stripAssistantScaffolding(text: string): { text: string; stripped: boolean } {
  if (!/[<[]/.test(text)) return { text, stripped: false };
  const { masked, restore } = protectCode(text);
  let t = masked;
  for (const f of FAMILY_RES) t = stripFamily(t, f);
  t = t.replace(MARKER_RE, "").replace(CONTROL_TOKEN_RE, "");
  if (t === masked) return { text, stripped: false };
  t = t
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
  return { text: restore(t), stripped: true };
}

// ─── one text field ──────────────────────────────────────────────────────────────────────────

/** A cut that never splits a surrogate pair. */
function safeCut(s: string, n: number): string {
  if (s.length <= n) return s;
  const code = s.charCodeAt(n - 1);
  return s.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n);
}

export interface SanitizedText {
  text: string;
  redacted: boolean;
  truncated: boolean;
  stripped: boolean;
}

/**
 * One text field of the history view: strip (assistant text only, `strip` default true), redact,
 * then cut at HISTORY_TEXT_LIMIT_CHARS including TRUNCATION_MARKER.
 */
export function sanitizeText(text: string, opts: { strip?: boolean } = {}): SanitizedText {
  let t = text;
  let truncated = false;
  if (t.length > WORK_WINDOW_CHARS) {
    t = safeCut(t, WORK_WINDOW_CHARS);
    truncated = true;
  }
  let stripped = false;
  if (opts.strip !== false) ({ text: t, stripped } = stripAssistantScaffolding(t));
  const red = redactText(t);
  t = red.text;
  if (t.length > HISTORY_TEXT_LIMIT_CHARS || truncated) {
    t = safeCut(t, HISTORY_TEXT_LIMIT_CHARS - TRUNCATION_MARKER.length) + TRUNCATION_MARKER;
    truncated = true;
  }
  return { text: t, redacted: red.redacted, truncated, stripped };
}

// ─── messages and the bounded view ───────────────────────────────────────────────────────────

export interface SafeMessage {
  id: string;
  role: MessageRole;
  content: unknown;
  timestamp: number;
  provenance?: Provenance;
  toolCallId?: string;
  toolName?: string;
  model?: string;
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

function imageBlock(obj: Record<string, unknown>): Record<string, unknown> | undefined {
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
