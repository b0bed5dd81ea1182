import { assertRecord, runProblem, sessionProblem } from "../records.js";
import type { RunRecord, SessionEntry } from "../types.js";

/**
 * Checks and JSON encoding of what the store persists. Stored text is plain JSON, so every
 * read parses a fresh copy and `undefined` fields vanish exactly as they would after a reload.
 */

/** A JSON-clean copy of `entry` after the shared checks (`../records.ts`); `what` names it in the error. */
export function normalizeEntry(entry: SessionEntry, what: string): SessionEntry {
  assertRecord(sessionProblem(entry), what);
  return JSON.parse(JSON.stringify(entry)) as SessionEntry;
}

export function normalizeRun(run: RunRecord, what: string): RunRecord {
  assertRecord(runProblem(run), what);
  return JSON.parse(JSON.stringify(run)) as RunRecord;
}

/** Parses stored JSON; null for text that is not an object (reported by the caller). */
export function parseObject<T>(text: string | null | undefined): T | null {
  if (text === null || text === undefined) return null;
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as T) : null;
  } catch {
    return null;
  }
}
