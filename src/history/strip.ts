import { fenceOpen, isFenceClose } from "../fence.js";

/**
 * Assistant text normalisation (SEMANTICS §3): removes thinking, memory scaffolding, plain-text
 * tool-call XML, downgraded tool markers and leaked control tokens, leaving code as is.
 */

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
    const open = fenceOpen(line);
    if (!open) {
      plain += line;
      continue;
    }
    out += protectInline(plain, hold);
    plain = "";
    let block = line;
    let closed = false;
    while (++i < lines.length) {
      const l = lines[i] ?? "";
      block += l;
      if (isFenceClose(l, open.marker)) {
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

/** Stands for removed text until whitespace clean-up decides what spacing remains. */
const GAP = "\uE002";

const THINK_NAMES = "think|thinking|thought|antthinking";
const MEMORY_NAMES = "relevant[-_]memories";
const TOOL_NAMES = "tool_calls|tool_call|function_calls|function_call|tool_result|function_result|invoke";

const THINK_OPEN = new RegExp(String.raw`<(?:${THINK_NAMES})(?![\w-])[^<>]*>`, "gi");
const THINK_CLOSE = new RegExp(String.raw`<\/(?:${THINK_NAMES})\s*>`, "gi");
const MEMORY_OPEN = new RegExp(String.raw`<(?:${MEMORY_NAMES})(?![\w-])[^<>]*>`, "gi");
const MEMORY_CLOSE = new RegExp(String.raw`<\/(?:${MEMORY_NAMES})\s*>`, "gi");
/** A tool tag: optional namespace (`minimax:`), a known name, attributes on one line, maybe self-closing. */
const TOOL_OPEN = new RegExp(String.raw`<(?:[\w-]+:)?(${TOOL_NAMES})(?![\w-])(?:\s[^<>\n]*|\/)?>`, "gi");
const TOOL_CLOSE = new RegExp(String.raw`<\/(?:[\w-]+:)?(?:${TOOL_NAMES})\s*>`, "gi");

/**
 * Thinking and memory blocks: open…close removed, an unterminated one removed to the end. For
 * thinking, an orphan closing tag means everything before it was thinking. One forward scan.
 */
function stripSimpleFamily(t: string, open: RegExp, close: RegExp, orphanSwallowsPrefix: boolean): string {
  let out = "";
  let pos = 0;
  for (;;) {
    open.lastIndex = pos;
    const o = open.exec(t);
    if (!o) break;
    out += t.slice(pos, o.index) + GAP;
    close.lastIndex = o.index + o[0].length;
    const c = close.exec(t);
    if (!c) return out;
    pos = c.index + c[0].length;
  }
  out += t.slice(pos);
  close.lastIndex = 0;
  if (!orphanSwallowsPrefix) return out.replace(close, GAP);
  let cut = -1;
  for (const m of out.matchAll(close)) cut = m.index + m[0].length;
  return cut === -1 ? out : out.slice(cut);
}

/** The previous non-whitespace character before `i` (or "" at the start). */
function prevNonSpace(t: string, i: number, floor: number): string {
  for (let j = i - 1; j >= floor; j--) if (!/\s/.test(t[j] ?? "")) return t[j] ?? "";
  return "";
}

/**
 * Where the block opened by a `name` tag ends (index after its closing tag), or -1. Same-name tags
 * nest; a closing tag inside a quoted string of a JSON payload does not count.
 */
function findBlockEnd(t: string, from: number, name: string): number {
  // A malformed payload (a JSON object that never closes) falls back to a plain scan.
  const seen = { json: false };
  const end = scanBlock(t, from, name, true, seen);
  return end === -1 && seen.json ? scanBlock(t, from, name, false, seen) : end;
}

function scanBlock(
  t: string,
  from: number,
  name: string,
  jsonAware: boolean,
  seen: { json: boolean },
): number {
  const sameOpen = new RegExp(String.raw`<(?:[\w-]+:)?${name}(?![\w-])(?:\s[^<>\n]*|\/)?>`, "iy");
  const sameClose = new RegExp(String.raw`<\/(?:[\w-]+:)?${name}\s*>`, "iy");

  let depth = 1;
  let json = 0;
  let quote = "";
  for (let i = from; i < t.length; i++) {
    const ch = t[i];
    if (quote) {
      if (ch === "\\") i++;
      else if (ch === quote) quote = "";
      continue;
    }
    if (json > 0) {
      if (ch === '"' || ch === "'") quote = ch;
      else if (ch === "{" || ch === "[") json++;
      else if (ch === "}" || ch === "]") json--;
      continue;
    }
    if (jsonAware && (ch === "{" || ch === "[")) {
      // A JSON payload starts right after a tag (or at the block start).
      const prev = prevNonSpace(t, i, from);
      if (prev === "" || prev === ">") {
        json = 1;
        seen.json = true;
      }
      continue;
    }
    if (ch !== "<") continue;
    sameClose.lastIndex = i;
    const c = sameClose.exec(t);
    if (c) {
      if (--depth === 0) return i + c[0].length;
      i += c[0].length - 1;
      continue;
    }
    sameOpen.lastIndex = i;
    const o = sameOpen.exec(t);
    if (o && !o[0].endsWith("/>")) {
      depth++;
      i += o[0].length - 1;
    }
  }
  return -1;
}

/** An unterminated tool block is machine output only when a payload follows its tag. */
function payloadFollows(t: string, at: number): boolean {
  return /^\s*(?:\{|\[\s*[{["]|<(?:[\w-]+:)?(?:invoke|parameter)(?![\w-])|<function=)/i.test(
    t.slice(at, at + 200),
  );
}

/**
 * Plain-text tool-call XML: closed blocks and self-closing tags go; an unterminated block goes to
 * the end only when a payload follows its tag (a bare tag mentioned in prose stays); orphan
 * closing tags go.
 */
/** Bare mentions whose block is searched for a closing tag; beyond this, scanning stops (linear bound). */
const MAX_UNCLOSED_SCANS = 16;

function stripToolFamily(t: string): string {
  let out = "";
  let pos = 0;
  let scan = 0;
  for (let unclosed = 0; unclosed < MAX_UNCLOSED_SCANS; ) {
    TOOL_OPEN.lastIndex = scan;
    const o = TOOL_OPEN.exec(t);
    if (!o) break;
    const name = (o[1] ?? "").toLowerCase();
    const afterOpen = o.index + o[0].length;
    if (o[0].endsWith("/>")) {
      out += t.slice(pos, o.index) + GAP;
      pos = scan = afterOpen;
      continue;
    }
    const end = findBlockEnd(t, afterOpen, name);
    if (end !== -1) {
      out += t.slice(pos, o.index) + GAP;
      pos = scan = end;
      continue;
    }
    // An invoke tag naming its tool is machine output even when the text stops right after it.
    if (payloadFollows(t, afterOpen) || (name === "invoke" && /\sname\s*=/i.test(o[0]))) {
      out += t.slice(pos, o.index) + GAP;
      pos = scan = t.length;
      break;
    }
    scan = afterOpen; // a bare mention: keep it and look further
    unclosed++;
  }
  out += t.slice(pos);
  TOOL_CLOSE.lastIndex = 0;
  return out.replace(TOOL_CLOSE, GAP);
}

/** Longest marker looked at; a bracket not closed within it is not a marker (linear bound). */
const MARKER_MAX_CHARS = 1000;

/** Index after the `]` that closes the `[` at `start` on the same line, or -1. */
function closingBracket(t: string, start: number): number {
  let depth = 0;
  for (let i = start; i < t.length && i < start + MARKER_MAX_CHARS; i++) {
    const ch = t[i];
    if (ch === "\n") return -1;
    if (ch === "[") {
      // Markers do not nest: another marker start means this bracket is not one.
      MARKER_AT.lastIndex = i;
      if (i > start && MARKER_AT.test(t)) return -1;
      depth++;
    } else if (ch === "]" && --depth === 0) return i + 1;
  }
  return -1;
}

/** Index after a JSON value starting at `start` (strings and nesting respected), or -1. */
function jsonEnd(t: string, start: number): number {
  let depth = 0;
  let quote = "";
  for (let i = start; i < t.length; i++) {
    const ch = t[i];
    if (quote) {
      if (ch === "\\") i++;
      else if (ch === quote) quote = "";
      continue;
    }
    if (ch === '"') quote = ch;
    else if (ch === "{" || ch === "[") depth++;
    else if ((ch === "}" || ch === "]") && --depth === 0) return i + 1;
  }
  return -1;
}

const MARKER_START = /\[(?:Tool Call:|Tool Result\b|Historical context\b)/gi;
const MARKER_AT = new RegExp(MARKER_START.source, "iy");
const ARGUMENTS_LINE = /^\n[ \t]*Arguments:[ \t]*/;

/**
 * Downgraded tool markers: `[Tool Call: …]` (with the `Arguments:` line that follows it),
 * `[Tool Result …]`, `[Historical context …]`. Only the bracketed marker goes, never the rest of
 * its line; an unclosed bracket is not a marker.
 */
function stripMarkers(t: string): string {
  let out = "";
  let pos = 0;
  MARKER_START.lastIndex = 0;
  for (let m = MARKER_START.exec(t); m; m = MARKER_START.exec(t)) {
    if (m.index < pos) continue;
    let end = closingBracket(t, m.index);
    if (end === -1) continue;
    if (/^\[Tool Call:/i.test(m[0])) {
      const args = ARGUMENTS_LINE.exec(t.slice(end));
      if (args) {
        const valueAt = end + args[0].length;
        const lineEnd = t.indexOf("\n", valueAt);
        const json = /[{[]/.test(t[valueAt] ?? "") ? jsonEnd(t, valueAt) : -1;
        end = json !== -1 ? json : lineEnd === -1 ? t.length : lineEnd;
      }
    }
    out += t.slice(pos, m.index) + GAP;
    pos = end;
    MARKER_START.lastIndex = end;
  }
  return out + t.slice(pos);
}

const CONTROL_TOKEN_RE = /<[|｜][^|｜\n<>]{0,100}[|｜]>/g;

/**
 * What a removal leaves: nothing at a line's start or end, one space between two words that
 * had spacing, nothing between two that had none.
 */
function closeGaps(t: string): string {
  return t.replace(
    /([ \t]*)\uE002+([ \t]*)/g,
    (_m, before: string, after: string, at: number, all: string) => {
      const prev = at === 0 ? "\n" : all[at - 1];
      const next = all[at + _m.length] ?? "\n";
      if (prev === "\n" || next === "\n") return "";
      return before || after ? " " : "";
    },
  );
}

/**
 * Removes thinking, memory scaffolding, plain-text tool-call XML, downgraded tool markers and
 * leaked control tokens from assistant text, leaving fenced and inline code as is.
 */
export function stripAssistantScaffolding(text: string): { text: string; stripped: boolean } {
  if (!/[<[]/.test(text) || text.includes(GAP)) return { text, stripped: false };
  const { masked, restore } = protectCode(text);
  let t = stripSimpleFamily(masked, THINK_OPEN, THINK_CLOSE, true);
  t = stripSimpleFamily(t, MEMORY_OPEN, MEMORY_CLOSE, false);
  t = stripToolFamily(t);
  t = stripMarkers(t).replace(CONTROL_TOKEN_RE, GAP);
  if (!t.includes(GAP) && t === masked) return { text, stripped: false };
  t = closeGaps(t)
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
  return { text: restore(t), stripped: true };
}
