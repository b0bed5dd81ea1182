import { z } from "zod";
import { MAX_PING_PONG_TURNS } from "../config/schema.js";
import { formatIssues } from "../errors.js";
import type { TurnJob, TurnOrigin } from "./types.js";

/**
 * What a turn carries in its request's `meta`, by origin (`TurnOrigin`): the pipeline stores and
 * hands back `meta` as an opaque record (journal, Redis), and this is its one typed reading. The
 * after-turn hooks are registered per origin (`onTurnEnd`, handlers.ts) and get the parsed meta
 * of their origin; nothing else looks into the record for it. Beside these keys, `meta` holds a
 * message's media parts (`parts`, media/parts.ts, per collected message) and its trace context
 * (telemetry/trace.ts), which any origin may carry.
 */

/** `meta.cron` of a scheduled turn (cron/service.ts writes it, cron/flow.ts reads it back). */
const cronTurnMetaSchema = z.object({
  jobId: z.string().min(1),
  tickAt: z.number(),
  trigger: z.enum(["schedule", "catch-up", "manual", "retry"]),
});
export type CronTurnMeta = z.infer<typeof cronTurnMetaSchema>;

/** `meta.hookDeliver` of a webhook turn: the chat its reply goes to (`POST /hooks/agent`). */
const hookDeliverSchema = z.object({
  channel: z.string().min(1),
  to: z.string().min(1),
  accountId: z.string().min(1).optional(),
  threadId: z.string().min(1).optional(),
});
export type HookDeliver = z.infer<typeof hookDeliverSchema>;

/** What `sessions_send` records on the primary run (`meta.a2a`). */
export const a2aRequestSchema = z.object({
  requesterKey: z.string().min(1),
  requesterAgentId: z.string().min(1),
  requesterChannel: z.string(),
  targetKey: z.string().min(1),
  targetAgentId: z.string().min(1),
  targetChannel: z.string(),
  originalMessage: z.string(),
  /** Stored files sent with the message (`sessions_send` attachments): posted with the announce. */
  attachments: z
    .array(z.object({ mediaId: z.string().min(1) }))
    .max(100)
    .optional(),
});
export type A2ARequest = z.infer<typeof a2aRequestSchema>;

export const a2aFlowSchema = a2aRequestSchema.extend({
  primaryRunId: z.string().min(1),
  /** Loop turns allowed (0..MAX_PING_PONG_TURNS); 0 for a self-send. Fixed when the primary run ends. */
  maxTurns: z.number().int().min(0).max(MAX_PING_PONG_TURNS),
});
export type A2AFlow = z.infer<typeof a2aFlowSchema>;

export const a2aStateSchema = z.object({ roundOneReply: z.string(), latestReply: z.string() });
export type A2AState = z.infer<typeof a2aStateSchema>;

const a2aStepSchema = z.discriminatedUnion("phase", [
  z.object({ phase: z.literal("turn"), turn: z.number().int().min(1) }),
  z.object({ phase: z.literal("announce") }),
]);
export type A2AStep = z.infer<typeof a2aStepSchema>;

/** `meta.a2aStep` of a loop or announce turn of the flow (flows/a2a.ts). */
const a2aStepMetaSchema = z.object({
  flow: a2aFlowSchema,
  state: a2aStateSchema,
  step: a2aStepSchema,
});
type A2AStepMeta = z.infer<typeof a2aStepMetaSchema>;

/** `meta.spawn` of a sub-agent's run (and of an orchestrator's wake-up): whom its completion is announced to. */
export const spawnMetaSchema = z.object({
  requesterKey: z.string().min(1),
  childKey: z.string().min(1),
  /** The requester's own requesters, nearest first: fallbacks when the requester is gone. */
  chain: z.array(z.string()).default([]),
});
export type SpawnMeta = z.input<typeof spawnMetaSchema>;

/** `meta` of a session command's turn (`/compact [instructions]`). */
const commandMetaSchema = z.object({
  command: z.literal("compact").optional().catch(undefined),
  instructions: z.string().optional().catch(undefined),
});

/** The typed meta of one turn, keyed by its origin. */
export type TurnMeta =
  | { origin: "inbound" }
  | { origin: "operator" }
  | { origin: "command"; command?: "compact"; instructions?: string }
  | { origin: "cron"; cron: CronTurnMeta }
  | { origin: "hook"; hookDeliver?: HookDeliver }
  | { origin: "sessions_send"; a2a: A2ARequest }
  | { origin: "a2a"; a2aStep: A2AStepMeta }
  | { origin: "spawn"; spawn: z.output<typeof spawnMetaSchema> }
  | { origin: "announce"; spawn?: z.output<typeof spawnMetaSchema> };

export type TurnMetaOf<O extends TurnOrigin> = Extract<TurnMeta, { origin: O }>;

/** Each origin's reading of the record; a key the origin needs that is missing or malformed fails it. */
const schemas: { readonly [O in TurnOrigin]: z.ZodType<Omit<TurnMetaOf<O>, "origin">> } = {
  inbound: z.object({}),
  operator: z.object({}),
  command: commandMetaSchema,
  cron: z.object({ cron: cronTurnMetaSchema }),
  hook: z.object({ hookDeliver: hookDeliverSchema.optional() }),
  sessions_send: z.object({ a2a: a2aRequestSchema }),
  a2a: z.object({ a2aStep: a2aStepMetaSchema }),
  spawn: z.object({ spawn: spawnMetaSchema }),
  announce: z.object({ spawn: spawnMetaSchema.optional() }),
};

/** A turn's meta read for its origin, or why it cannot be (the origin's follow-ups are skipped then). */
type TurnMetaReading = { ok: true; meta: TurnMeta } | { ok: false; origin: TurnOrigin; error: string };

const readings = new WeakMap<TurnJob, TurnMetaReading>();

/**
 * The job's meta for its origin, read once per job (the runtime and the hooks share the reading).
 * Only collected turns have several messages, and their origins (inbound, operator) read no key,
 * so the first message's meta (`job.meta`) is the turn's.
 */
export function turnMetaOf(job: TurnJob): TurnMetaReading {
  const known = readings.get(job);
  if (known) return known;
  const parsed = schemas[job.origin].safeParse(job.meta ?? {});
  const reading: TurnMetaReading = parsed.success
    ? { ok: true, meta: { ...parsed.data, origin: job.origin } as TurnMeta }
    : { ok: false, origin: job.origin, error: formatIssues(parsed.error.issues, "meta.") };
  readings.set(job, reading);
  return reading;
}
