/**
 * Limits on untrusted JSON (frames, request and webhook bodies, tool arguments from a model). `JSON.parse` accepts nesting far
 * deeper than `JSON.stringify`, structuredClone or a recursive validator survive, so the nesting
 * depth is measured on the raw text first, before anything is parsed.
 */

export const DEFAULT_MAX_JSON_DEPTH = 64;

/**
 * Largest `{`/`[` nesting in `text`, scanning outside string literals only; stops counting once
 * `limit` is passed (the answer is then `limit + 1`). Linear in the text, no recursion.
 */
export function jsonNestingDepth(text: string, limit = Number.POSITIVE_INFINITY): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--;
  }
  return max;
}

export type GuardedJson =
  | { ok: true; value: unknown }
  | { ok: false; reason: "invalid" | "too-deep"; message: string };

/** Parses untrusted JSON text with a nesting limit; never throws. */
export function parseGuardedJson(text: string, maxDepth: number): GuardedJson {
  if (jsonNestingDepth(text, maxDepth) > maxDepth)
    return {
      ok: false,
      reason: "too-deep",
      message: `JSON nested deeper than ${maxDepth} levels`,
    };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, reason: "invalid", message: "not valid JSON" };
  }
}

/** JSON.stringify that never throws (a value that cannot be serialised yields null). */
export function safeStringify(value: unknown): string | null {
  try {
    return JSON.stringify(value) ?? null;
  } catch {
    return null;
  }
}
