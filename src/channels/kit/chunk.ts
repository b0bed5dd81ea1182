import { InvalidParamsError } from "../../errors.js";
import { fenceOpen, isFenceClose } from "../../fence.js";

/**
 * Split text into messages of at most `limit` UTF-16 units (the unit every platform limit
 * here is stated in). Preferred cut points, best first: a blank line (or the edge of a code
 * fence) outside code, a line end outside code, a line end inside a fence, a space, and
 * finally a hard cut that never separates a surrogate pair. A fence that has to be cut is
 * closed at the end of one chunk and reopened with the same marker and language at the start
 * of the next, so every chunk renders on its own. Every chunk is ≤ limit; empty text gives [].
 */
export function chunkText(text: string, limit: number): string[] {
  if (!Number.isInteger(limit) || limit < 1)
    throw new InvalidParamsError("limit: must be a positive integer");
  if (!text) return [];
  if (text.length <= limit) return [text];

  const chunks: string[] = [];
  let rest = text;
  let reopen = "";
  for (;;) {
    const body = reopen ? `${reopen}\n${rest}` : rest;
    if (body.length <= limit) {
      if (body.slice(reopen.length).trim()) chunks.push(body);
      break;
    }
    // Only a limit too small to hold a reopened fence falls back to cutting without repair.
    const cut = findCut(body, limit, reopen) ?? plainCut(reopen ? rest : body, limit);
    if (cut.chunk.trim()) chunks.push(cut.chunk);
    rest = cut.rest;
    reopen = cut.reopen;
  }
  return chunks;
}

interface Cut {
  chunk: string;
  rest: string;
  /** Fence opening line to put back in front of `rest` ("" when the cut is outside code). */
  reopen: string;
}

interface Line {
  start: number;
  end: number;
  /** The open fence (its opening line and marker) before this line, if any. */
  fence?: { open: string; marker: string };
  /** Whether a fence is still open after this line. */
  openAfter?: { open: string; marker: string };
  blank: boolean;
}

function scanLines(body: string, upTo: number): Line[] {
  const lines: Line[] = [];
  let fence: { open: string; marker: string } | undefined;
  let start = 0;
  while (start <= body.length && start <= upTo + 1) {
    const nl = body.indexOf("\n", start);
    const end = nl < 0 ? body.length : nl;
    const text = body.slice(start, end);
    const before = fence;
    if (fence) {
      if (isFenceClose(text, fence.marker)) fence = undefined;
    } else {
      const open = fenceOpen(text);
      if (open) fence = { open: text.trim(), marker: open.marker };
    }
    lines.push({ start, end, fence: before, openAfter: fence, blank: !before && !text.trim() });
    if (nl < 0) break;
    start = nl + 1;
  }
  return lines;
}

/** Fence-aware cut; undefined when the limit is too small to repair a fence. */
function findCut(body: string, limit: number, reopen: string): Cut | undefined {
  // A cut must take at least one character beyond a reopened fence line.
  const minEnd = reopen ? reopen.length + 1 : 1;
  const lines = scanLines(body, limit);
  const outside = (chunkEnd: number): Cut => ({
    chunk: body.slice(0, chunkEnd).trimEnd(),
    // Drop the line break and any blank lines, keep the next line's indentation.
    rest: body.slice(chunkEnd).replace(/^\n(?:[ \t]*\n)*/, ""),
    reopen: "",
  });

  // 1. paragraph boundary outside code: before a blank line, before a fence, after a fence.
  for (let k = lines.length - 1; k >= 0; k--) {
    const l = lines[k] as Line;
    const next = lines[k + 1];
    if (l.end > limit || l.end < minEnd || l.openAfter || l.blank) continue;
    const closesFence = l.fence !== undefined;
    const opensNext = next !== undefined && !next.fence && next.openAfter !== undefined;
    if (next?.blank || closesFence || opensNext) return outside(l.end);
  }
  // 2. line end outside code.
  for (let k = lines.length - 1; k >= 0; k--) {
    const l = lines[k] as Line;
    if (l.end <= limit && l.end >= minEnd && !l.openAfter && !l.blank && k + 1 < lines.length)
      return outside(l.end);
  }
  // 3. line end inside a fence (not right after its opening line): close here, reopen next.
  for (let k = lines.length - 1; k >= 0; k--) {
    const l = lines[k] as Line;
    const f = l.openAfter;
    // Not the opening line (l.fence), and not just before the closing line (no empty reopened block).
    if (!f || !l.fence || lines[k + 1]?.openAfter === undefined) continue;
    const close = `\n${f.marker}`;
    if (l.end + close.length <= limit && l.end >= minEnd)
      return { chunk: body.slice(0, l.end) + close, rest: body.slice(l.end + 1), reopen: f.open };
  }
  // 4. a space, then 5. a hard cut, inside the line that crosses the limit.
  const crossing = lines.find((l) => l.end > limit) ?? (lines[lines.length - 1] as Line);
  const f = crossing.fence;
  const close = f ? `\n${f.marker}` : "";
  const max = limit - close.length;
  if (max < minEnd) return undefined;
  const from = Math.max(crossing.start, minEnd);
  const space = Math.max(body.lastIndexOf(" ", max), body.lastIndexOf("\t", max));
  if (space >= from && space > 0) {
    const chunk = f ? body.slice(0, space) + close : body.slice(0, space).trimEnd();
    if (chunk.trim()) return { chunk, rest: body.slice(space + 1), reopen: f ? f.open : "" };
  }
  const hard = safeEnd(body, max);
  if (hard < minEnd) return undefined;
  return { chunk: body.slice(0, hard) + close, rest: body.slice(hard), reopen: f ? f.open : "" };
}

/** No fence awareness: paragraph, line, space, hard cut. */
function plainCut(text: string, limit: number): Cut {
  const window = text.slice(0, limit + 1);
  for (const sep of ["\n\n", "\n", " "]) {
    const at = window.lastIndexOf(sep, limit);
    if (at > 0 && at <= limit) {
      const chunk = text.slice(0, at).trimEnd();
      if (chunk) return { chunk, rest: text.slice(at + sep.length).replace(/^\n+/, ""), reopen: "" };
    }
  }
  const hard = safeEnd(text, limit);
  return { chunk: text.slice(0, hard), rest: text.slice(hard), reopen: "" };
}

/** `end` moved back one unit if it would split a surrogate pair (and never below 1). */
function safeEnd(s: string, end: number): number {
  const code = s.charCodeAt(end - 1);
  return end > 1 && code >= 0xd800 && code <= 0xdbff ? end - 1 : end;
}
