import { z } from "zod";
import type { Identical } from "../../exact.js";
import type { RunRecord } from "../../store/types.js";
import {
  fallbackSchema,
  finalResultSchema,
  followUpSchema,
  turnRequestSchema,
  usageSchema,
} from "../schema.js";

/**
 * Validation for what callers hand the bullmq driver, for its options, and for what it reads back
 * from Redis (envelopes, job data, bus messages — written by another process, so checked too).
 */

/** What `{tag}:run:<id>` keeps of an accepted turn (`env`). */
export const envelopeSchema = z.object({ req: turnRequestSchema, createdAt: z.number() });
export type Envelope = z.infer<typeof envelopeSchema>;

export const drainDataSchema = z.object({ s: z.string().min(1) });

/** One entry of `{tag}:outbox`: a follow-up and the run that committed it. */
export const outboxEntrySchema = z.object({ from: z.string(), followUp: followUpSchema });
export type OutboxEntry = z.infer<typeof outboxEntrySchema>;

/** `act.final`: the committed outcome of the turn in flight and its outbox entries (exact strings). */
export const committedSchema = z.object({ result: finalResultSchema, outbox: z.array(z.string()) });

export const runRecordSchema = z.object({
  runId: z.string(),
  sessionKey: z.string(),
  agentId: z.string(),
  status: z.enum(["queued", "running", "waiting", "ok", "error", "timeout", "aborted"]),
  createdAt: z.number(),
  startedAt: z.number().optional(),
  endedAt: z.number().optional(),
  reply: z.string().optional(),
  error: z.string().optional(),
  usage: usageSchema.optional(),
  model: z.string().optional(),
  fallbacks: z.array(fallbackSchema).optional(),
  origin: z.string().optional(),
  deliver: z.boolean().optional(),
  deliveryError: z.string().optional(),
  waitingFor: z.object({ approvalId: z.string(), tool: z.string(), args: z.unknown() }).optional(),
});
/** A run record read back from Redis keeps every field (usage.model was once stripped here). */
const runRecordIsExact: Identical<z.output<typeof runRecordSchema>, RunRecord> = true;
void runRecordIsExact;

/** Messages on the `{tag}:bus` channel. `from` is the sending pipeline instance. */
export const busMessageSchema = z.discriminatedUnion("t", [
  z.object({
    t: z.literal("ev"),
    from: z.string(),
    type: z.enum(["run.started", "run.finished"]),
    runs: z.array(runRecordSchema),
  }),
  z.object({
    t: z.literal("cancel"),
    from: z.string(),
    runId: z.string(),
    reason: z.enum(["aborted", "timeout"]),
  }),
  z.object({ t: z.literal("steer"), from: z.string(), runId: z.string(), text: z.string() }),
]);
export type BusMessage = z.infer<typeof busMessageSchema>;

/** Parses caller input or throws InvalidParamsError naming the field (`turn.sessionKey: …`). */

/** Parses JSON written by another process; null (and the caller logs) when unreadable. */
export function parseStored<T>(schema: z.ZodType<T>, raw: string): T | null {
  try {
    const res = schema.safeParse(JSON.parse(raw));
    return res.success ? res.data : null;
  } catch {
    return null;
  }
}

/**
 * Driver options beyond the connections, store and logger. Required: prefix, concurrency, mode,
 * lockDurationMs, stalledIntervalMs (from `queue.*` config); every other field has a default.
 */
export const bullmqOptionsSchema = z.object({
  /** Key prefix; becomes the Cluster hash tag `{prefix}` of every key (see keys.ts). */
  prefix: z.string().min(1),
  /** Jobs (turns + background) this process runs at once. */
  concurrency: z.number().int().min(1).max(1024),
  mode: z.enum(["collect", "followup"]),
  /** BullMQ job lock; a crashed worker's turn is re-run after about lockDurationMs + stalledIntervalMs. */
  lockDurationMs: z.number().int().min(200),
  stalledIntervalMs: z.number().int().min(100),
  /** false: this process only enqueues/waits/cancels; `start()` runs no worker (gateway-only role). */
  processJobs: z.boolean().default(true),
  /**
   * A process that runs jobs takes the session's next turn itself when it accepts a message, has a
   * free slot and no turn of the session is in flight (direct.ts). false: every turn goes through
   * BullMQ.
   */
  directTurns: z.boolean().default(true),
  /**
   * The RunStore writes over this pipeline's own connection (the redis store on the same URL):
   * a record written before a script is in Redis before the script runs, so a message's `queued`
   * record and its push go out together (one round trip) instead of one after the other.
   */
  runsShareConnection: z.boolean().default(false),
  /**
   * How often (BullMQ Job Scheduler) non-empty mailboxes without a drain job are re-driven; also
   * how soon after its lock expired a direct turn whose process died is resumed. Defaults to
   * stalledIntervalMs: as soon after its lock expired as a stalled BullMQ job would be resumed.
   */
  sweepIntervalMs: z.number().int().min(100).optional(),
  /** Collect mode: at most this many messages are folded into one turn. */
  collectMax: z.number().int().min(1).max(10_000).default(100),
  /** A turn whose worker died this many times is ended as error instead of re-run again. */
  maxTurnAttempts: z.number().int().min(1).default(5),
  /** Failed background job: executions in total before it fails for good (RetryLaterError does not count). */
  jobMaxAttempts: z.number().int().min(1).default(3),
  /** Backoff before retry n of a failed background job: retryBaseMs × 2^(n-1). */
  retryBaseMs: z.number().int().min(0).default(1000),
  /**
   * Pipeline state of a finished run (`{tag}:run:<id>`, without its request) is kept this long, so
   * late cancels/steers answer false cheaply. Duplicate runIds are caught by the RunStore after that.
   */
  runRetentionMs: z.number().int().min(1000).default(3600_000),
  /** Cancel flags live this long (must outlast a crash recovery). */
  cancelFlagTtlMs: z
    .number()
    .int()
    .min(1000)
    .default(24 * 3600_000),
  /** Finished background jobs are kept (and their ids stay idempotent) this long / this many. */
  jobRetentionSeconds: z
    .number()
    .int()
    .min(1)
    .default(7 * 24 * 3600),
  jobRetentionCount: z.number().int().min(1).default(10_000),
  /** After `stop()` aborts in-flight jobs, how long it waits for their handlers before force-closing. */
  abortSettleMs: z.number().int().min(0).default(1000),
  /** BullMQ `runRetryDelay`: pause before the worker retries after a Redis connection error. */
  reconnectRetryMs: z.number().int().min(10).default(2000),
});

export type BullmqTuning = z.output<typeof bullmqOptionsSchema>;
export type BullmqTuningInput = z.input<typeof bullmqOptionsSchema>;
