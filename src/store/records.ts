import { z } from "zod";
import { InvalidParamsError } from "../errors.js";
import type { RunRecord, RunStatus, SessionEntry } from "./types.js";

/**
 * What every store driver checks before it persists a record (and when it reads one back): one
 * zod schema per record, shared by the fs and redis drivers so they accept and refuse the same
 * records. Fields the schemas do not name pass through untouched (the types say what they are).
 */

export const RUN_STATUSES = [
  "queued",
  "running",
  "waiting",
  "ok",
  "error",
  "timeout",
  "aborted",
] as const satisfies readonly RunStatus[];

const nonEmpty = z
  .string({ error: "must be a non-empty string" })
  .min(1, { error: "must be a non-empty string" });
const ms = z
  .number({ error: "must be a finite number (ms)" })
  .finite({ error: "must be a finite number (ms)" });
const optionalString = z.string({ error: "must be a string" }).optional();

export const storedSessionSchema = z.looseObject(
  {
    key: nonEmpty,
    sessionId: nonEmpty,
    agentId: nonEmpty,
    createdAt: ms,
    updatedAt: ms,
    label: optionalString,
    spawnedBy: optionalString,
  },
  { error: "must be an object" },
);

export const storedRunSchema = z.looseObject(
  {
    runId: nonEmpty,
    sessionKey: nonEmpty,
    agentId: nonEmpty,
    status: z.enum(RUN_STATUSES, { error: `must be one of ${RUN_STATUSES.join(", ")}` }),
    createdAt: ms,
  },
  { error: "must be an object" },
);

/** The first thing wrong with `v` as `field: message` (`(root)` for the record itself), or null. */
export function recordProblem(schema: z.ZodType, v: unknown): string | null {
  const r = schema.safeParse(v);
  if (r.success) return null;
  const issue = r.error.issues[0];
  if (!issue) return "(root): is not valid";
  return `${issue.path.map(String).join(".") || "(root)"}: ${issue.message}`;
}

const RUN_STATUS_SET: ReadonlySet<unknown> = new Set(RUN_STATUSES);
const isText = (v: unknown): boolean => typeof v === "string" && v.length > 0;
const isMs = (v: unknown): boolean => typeof v === "number" && Number.isFinite(v);
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The schemas' own verdict, checked by hand first: every record a store writes is checked (the
 * gateway's own, three times a turn), and a record that passes needs no zod run. A record that
 * fails goes through zod, so the message naming its field is zod's. `records.test.ts` holds the
 * hand checks to the schemas.
 */
export function sessionFits(v: unknown): boolean {
  return (
    isObject(v) &&
    isText(v.key) &&
    isText(v.sessionId) &&
    isText(v.agentId) &&
    isMs(v.createdAt) &&
    isMs(v.updatedAt) &&
    (v.label === undefined || typeof v.label === "string") &&
    (v.spawnedBy === undefined || typeof v.spawnedBy === "string")
  );
}

/** `storedRunSchema`'s verdict by hand (see `sessionFits`). */
export function runFits(v: unknown): boolean {
  return (
    isObject(v) &&
    isText(v.runId) &&
    isText(v.sessionKey) &&
    isText(v.agentId) &&
    RUN_STATUS_SET.has(v.status) &&
    isMs(v.createdAt)
  );
}

export const sessionProblem = (v: unknown): string | null =>
  sessionFits(v) ? null : recordProblem(storedSessionSchema, v);
export const runProblem = (v: unknown): string | null =>
  runFits(v) ? null : recordProblem(storedRunSchema, v);

/** Throws INVALID_PARAMS naming `what.field` when `v` is not a storable record. */
export function assertRecord(problem: string | null, what: string): void {
  if (problem) throw new InvalidParamsError(`${what}.${problem}`, { field: problem.split(":")[0] });
}

export function assertSession(v: unknown, what: string): asserts v is SessionEntry {
  assertRecord(sessionProblem(v), what);
}

export function assertRun(v: unknown, what: string): asserts v is RunRecord {
  assertRecord(runProblem(v), what);
}

/**
 * Applies a patch to a stored record without a JSON round trip of the whole record: stored
 * records are already JSON-clean (and never mutated), so only the patch's values need
 * cleaning. The result equals `JSON.parse(JSON.stringify({ ...current, ...patch }))` with
 * `undefined` patch values deleting their field and `skip` fields (identity) left alone.
 */
export function mergePatch(
  current: object,
  patch: object,
  skip: ReadonlySet<string>,
): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...current };
  for (const [field, value] of Object.entries(patch)) {
    if (skip.has(field)) continue;
    const clean = jsonClean(value);
    if (clean === undefined) delete merged[field];
    else merged[field] = clean;
  }
  return merged;
}

/** What a JSON round trip makes of an object member's value (`undefined`: the member is dropped). */
function jsonClean(v: unknown): unknown {
  switch (typeof v) {
    case "string":
    case "boolean":
      return v;
    case "number":
      return Number.isFinite(v) ? v : null;
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
    default: {
      if (v === null) return null;
      const text = JSON.stringify(v); // objects (toJSON honoured); a bigint throws, as before
      return text === undefined ? undefined : (JSON.parse(text) as unknown);
    }
  }
}

/** Fields a patch never changes. */
export const SESSION_IDENTITY: ReadonlySet<string> = new Set(["key", "createdAt"]);
export const RUN_IDENTITY: ReadonlySet<string> = new Set(["runId"]);
