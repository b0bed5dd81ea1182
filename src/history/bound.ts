import { redactText } from "../redact.js";
import { stripAssistantScaffolding } from "./strip.js";

/** Bounds of the history view: one text field is stripped, redacted, then cut. */

export const HISTORY_TEXT_LIMIT_CHARS = 4000;
export const HISTORY_MAX_BYTES = 80 * 1024;
/** Appended to a cut text field; the result including it is at most HISTORY_TEXT_LIMIT_CHARS long. */
export const TRUNCATION_MARKER = "\n…(truncated)";
export const MESSAGE_TOO_LARGE = "[sessions_history omitted: message too large]";
/** Huge fields are processed through this prefix only (linear cost, no pathological inputs). */
const WORK_WINDOW_CHARS = 64 * 1024;

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
