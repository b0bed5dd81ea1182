import { z } from "zod";
import { formatIssues, InvalidParamsError } from "../errors.js";
import type { Provenance } from "../store/types.js";
import type { BackgroundJob, TurnRequest } from "./types.js";

/**
 * Validation shared by both pipeline drivers: what callers hand `submitTurn`/`submit`, and what a
 * driver reads back from its journal or from Redis (written earlier or by another process).
 */

export const provenanceSchema: z.ZodType<Provenance> = z.object({
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

export const turnRequestSchema: z.ZodType<TurnRequest> = z.object({
  sessionKey: z.string().min(1),
  agentId: z.string().min(1),
  text: z.string(),
  provenance: provenanceSchema.optional(),
  deliver: z.boolean(),
  origin: z.string().min(1),
  extraSystem: z.string().optional(),
  timeoutMs: z.number().int().min(0).optional(),
  runId: z.string().min(1).max(200).optional(),
  meta: metaSchema.optional(),
});

export const backgroundJobSchema: z.ZodType<BackgroundJob> = z.object({
  kind: z.enum(["spawn", "a2a", "announce", "archive"]),
  id: z.string().min(1).max(500),
  data: metaSchema,
});

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
