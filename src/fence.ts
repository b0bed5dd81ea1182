/**
 * The one rule for fenced code blocks (CommonMark 0.31 §4.5, the rule `marked` applies when it
 * renders): an opening line is up to three spaces, then three or more backticks or tildes, then an
 * info string — which may not contain a backtick after a backtick fence; the block closes at a
 * line of up to three spaces and at least as many of the same character, nothing after but
 * spaces. Chunking (src/channels/kit/chunk.ts) cuts around fences with it and the transcript
 * normaliser (src/history/strip.ts) protects them with it. A leaf: it imports nothing.
 */

export interface FenceOpen {
  /** The run of backticks or tildes that opened the block. */
  marker: string;
  /** The first word of the info string ("" when none). */
  lang: string;
}

const OPEN = /^ {0,3}(`{3,}|~{3,})([^\n]*)$/;
const CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;

/** The fence a line opens, or null (a line may end with "\n"). */
export function fenceOpen(line: string): FenceOpen | null {
  const m = OPEN.exec(line.endsWith("\n") ? line.slice(0, -1) : line);
  const marker = m?.[1];
  if (!marker) return null;
  const info = m[2] ?? "";
  if (marker[0] === "`" && info.includes("`")) return null;
  return { marker, lang: info.trim().split(/\s/)[0] ?? "" };
}

/** Whether a line (with or without its "\n") closes a block opened with `marker`. */
export function isFenceClose(line: string, marker: string): boolean {
  const m = CLOSE.exec(line.endsWith("\n") ? line.slice(0, -1) : line);
  const run = m?.[1];
  return run !== undefined && run[0] === marker[0] && run.length >= marker.length;
}
