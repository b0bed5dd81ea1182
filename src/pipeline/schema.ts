import { z } from "zod";
import type { Provenance } from "../store/types.js";
import type { BackgroundJob, TurnRequest } from "./types.js";

/**
 * Validation shared by both pipeline drivers: what callers hand `submitTurn`/`submit`, and what a
 * driver reads back from its journal or from Redis (written earlier or by another process).
 */

export const provenanceSchema: z.ZodType<Provenance> = z.object({
  kind: z.enum(["external_user", "inter_session", "subagent_announce", "system", "operator"]),
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
