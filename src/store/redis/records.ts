import { InvalidParamsError } from "../../errors.js";
import type { RunRecord, RunStatus, SessionEntry } from "../types.js";

/**
 * Checks and JSON encoding of what the store persists. Stored text is plain JSON, so every
 * read parses a fresh copy and `undefined` fields vanish exactly as they would after a reload.
 */

const RUN_STATUSES: ReadonlySet<string> = new Set<RunStatus>([
  "queued",
  "running",
  "ok",
  "error",
  "timeout",
  "aborted",
]);

/** A JSON-clean copy of `entry` after the basic checks; `what` names it in the error. */
export function normalizeEntry(entry: SessionEntry, what: string): SessionEntry {
  const problem = entryProblem(entry);
  if (problem) throw new InvalidParamsError(`${what}.${problem}`, { field: problem.split(":")[0] });
  return JSON.parse(JSON.stringify(entry)) as SessionEntry;
}

export function normalizeRun(run: RunRecord, what: string): RunRecord {
  const problem = runProblem(run);
  if (problem) throw new InvalidParamsError(`${what}.${problem}`, { field: problem.split(":")[0] });
  return JSON.parse(JSON.stringify(run)) as RunRecord;
}

/** Shallow merge where `undefined` deletes; `fixed` fields keep their current value. */
export function mergePatch<T extends object>(cur: T, patch: object, fixed: ReadonlyArray<string>): T {
  const merged: Record<string, unknown> = { ...(cur as Record<string, unknown>) };
  for (const [field, value] of Object.entries(patch)) {
    if (fixed.includes(field)) continue;
    if (value === undefined) delete merged[field];
    else merged[field] = value;
  }
  return merged as unknown as T;
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

function entryProblem(e: unknown): string | null {
  if (typeof e !== "object" || e === null) return "(root): must be an object";
  const r = e as Record<string, unknown>;
  for (const f of ["key", "sessionId", "agentId"]) {
    if (typeof r[f] !== "string" || (r[f] as string).length === 0) return `${f}: must be a non-empty string`;
  }
  for (const f of ["createdAt", "updatedAt"]) {
    if (typeof r[f] !== "number" || !Number.isFinite(r[f])) return `${f}: must be a finite number (ms)`;
  }
  for (const f of ["label", "spawnedBy"]) {
    if (r[f] !== undefined && typeof r[f] !== "string") return `${f}: must be a string`;
  }
  return null;
}

function runProblem(v: unknown): string | null {
  if (typeof v !== "object" || v === null) return "(root): must be an object";
  const r = v as Record<string, unknown>;
  for (const f of ["runId", "sessionKey", "agentId"]) {
    if (typeof r[f] !== "string" || (r[f] as string).length === 0) return `${f}: must be a non-empty string`;
  }
  if (typeof r.status !== "string" || !RUN_STATUSES.has(r.status)) {
    return `status: must be one of ${[...RUN_STATUSES].join(", ")}`;
  }
  if (typeof r.createdAt !== "number" || !Number.isFinite(r.createdAt)) {
    return "createdAt: must be a finite number (ms)";
  }
  return null;
}
