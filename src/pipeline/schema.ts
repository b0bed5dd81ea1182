import { z } from "zod";
import { formatIssues, InvalidParamsError } from "../errors.js";
import type { Identical } from "../exact.js";
import type { Provenance, Usage } from "../store/types.js";
import {
  type BackgroundJob,
  type FollowUp,
  followUpId,
  TURN_ORIGINS,
  type TurnRequest,
  type TurnResult,
} from "./types.js";

/**
 * Validation shared by both pipeline drivers: what callers hand `submitTurn`/`submit`, and what a
 * driver reads back from its journal or from Redis (written earlier or by another process).
 */

export const provenanceSchema = z.object({
  kind: z.enum(["external_user", "inter_session", "subagent_announce", "system", "operator", "cron", "hook"]),
  sourceSessionKey: z.string().optional(),
  sourceRunId: z.string().optional(),
  sourceChannel: z.string().optional(),
  sourceTool: z.string().optional(),
  channel: z.string().optional(),
  senderId: z.string().optional(),
  senderName: z.string().optional(),
});

export const metaSchema = z.record(z.string(), z.unknown());

export const turnRequestSchema = z.object({
  sessionKey: z.string().min(1),
  agentId: z.string().min(1),
  text: z.string(),
  provenance: provenanceSchema.optional(),
  deliver: z.boolean(),
  origin: z.enum(TURN_ORIGINS),
  extraSystem: z.string().optional(),
  timeoutMs: z.number().int().min(0).optional(),
  runId: z.string().min(1).max(200).optional(),
  meta: metaSchema.optional(),
});

/** What the queue and the journal hand back is the request that was submitted, field for field. */
const turnRequestIsExact: Identical<z.output<typeof turnRequestSchema>, TurnRequest> = true;
const provenanceIsExact: Identical<z.output<typeof provenanceSchema>, Provenance> = true;
void turnRequestIsExact;
void provenanceIsExact;

export const backgroundJobSchema: z.ZodType<BackgroundJob> = z.object({
  kind: z.enum(["spawn", "a2a", "announce", "archive", "wake"]),
  id: z.string().min(1).max(500),
  data: metaSchema,
});

/** A follow-up as a turn handler returns it and as a driver reads it back from its outbox. */
export const followUpSchema: z.ZodType<FollowUp> = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("job"),
    job: backgroundJobSchema,
    delayMs: z.number().int().min(0).optional(),
  }),
  z.object({
    type: z.literal("turn"),
    // A follow-up turn must carry its runId: that is what makes its submission idempotent.
    turn: z.intersection(turnRequestSchema, z.object({ runId: z.string().min(1).max(200) })),
  }),
]);

/**
 * The final outcome a driver commits with the follow-ups (and re-applies to the RunStore after a
 * crash between the commit and the RunStore write).
 */
/** A run's or a turn's token counts and cost (store `Usage`). */
export const usageSchema = z.object({
  input: z.number(),
  output: z.number(),
  cacheRead: z.number().optional(),
  cacheWrite: z.number().optional(),
  cost: z.number().optional(),
  model: z.string().optional(),
});
const usageIsExact: Identical<z.output<typeof usageSchema>, Usage> = true;
void usageIsExact;

/** One model of a run's chain that did not answer (API.md §8.4). */
export const fallbackSchema = z.object({
  model: z.string(),
  class: z.string(),
  skipped: z.literal(true).optional(),
});

export const finalResultSchema = z.object({
  status: z.enum(["ok", "error", "timeout", "aborted"]),
  reply: z.string().optional(),
  error: z.string().optional(),
  usage: usageSchema.optional(),
  model: z.string().optional(),
  fallbacks: z.array(fallbackSchema).max(50).optional(),
  deliveryError: z.string().optional(),
});
export type FinalResult = z.infer<typeof finalResultSchema>;
const FINAL_KEYS = Object.keys(finalResultSchema.shape) as Array<keyof FinalResult>;

/** The parts of a handler's result that become the run record (no follow-ups). */
export function finalResultOf(result: FinalResult): FinalResult {
  // every key of the schema (a field added there is kept without touching this), none undefined
  const out: Partial<Record<keyof FinalResult, unknown>> = {};
  for (const k of FINAL_KEYS) if (result[k] !== undefined) out[k] = result[k];
  if (result.fallbacks?.length === 0) delete out.fallbacks;
  return out as FinalResult;
}

/**
 * A handler's result with its follow-ups validated and deduplicated by id (first wins). An invalid
 * follow-up is a handler bug: the run ends as error naming it (never `ok` with work missing).
 */
export function checkFollowUps(result: TurnResult): TurnResult {
  if (!result.followUps || result.followUps.length === 0) {
    if (result.followUps === undefined) return result;
    const { followUps: _drop, ...rest } = result;
    return rest;
  }
  const seen = new Set<string>();
  const out: FollowUp[] = [];
  for (const f of result.followUps) {
    const parsed = followUpSchema.safeParse(f);
    if (!parsed.success) {
      return {
        ...result,
        status: "error",
        error: `turn handler returned an invalid follow-up (${formatIssues(parsed.error.issues, "followUp.")})`,
        followUps: out,
      };
    }
    const id = followUpId(parsed.data);
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(parsed.data);
  }
  return { ...result, followUps: out };
}
/** Validates caller input; an error names the field under `prefix` (e.g. `turn.sessionKey`). */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, prefix: string): T {
  const res = schema.safeParse(value);
  if (!res.success) throw new InvalidParamsError(formatIssues(res.error.issues, `${prefix}.`));
  return res.data;
}

/** One in-flight promise per key: a second call while the first runs joins it (idempotent submits). */
export function singleFlight<K, V>(
  inFlight: Map<K, Promise<V>>,
  key: K,
  start: () => Promise<V>,
): Promise<V> {
  const joining = inFlight.get(key);
  if (joining) return joining;
  const p = start();
  inFlight.set(key, p);
  const done = () => inFlight.delete(key);
  p.then(done, done);
  return p;
}
