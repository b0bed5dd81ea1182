import { z } from "zod";
import { backgroundJobSchema, finalResultSchema, followUpSchema, turnRequestSchema } from "../schema.js";

/** Validation for what callers hand the pipeline and for what the journal reads back from disk. */

/** One journal line. `started` counts executions begun before a restart (attempt = started + 1). */
export const journalRecordSchema = z.discriminatedUnion("t", [
  z.object({
    t: z.literal("turn"),
    runId: z.string().min(1),
    createdAt: z.number(),
    req: turnRequestSchema,
    started: z.number().int().min(0).optional(),
  }),
  z.object({ t: z.literal("start"), runIds: z.array(z.string()) }),
  z.object({ t: z.literal("done"), runIds: z.array(z.string()) }),
  /**
   * The commit of a turn that caused follow-ups (transactional outbox): its final outcome and the
   * follow-ups, in ONE record. Replay re-applies the outcome to the RunStore (instead of re-running
   * the turn) and relays the follow-ups not yet `relayed`.
   */
  z.object({
    t: z.literal("final"),
    runIds: z.array(z.string()).min(1),
    result: finalResultSchema,
    followUps: z.array(followUpSchema),
  }),
  /** Every follow-up of the `final` record keyed by `runId` (its first run) was submitted. */
  z.object({ t: z.literal("relayed"), runId: z.string() }),
  z.object({
    t: z.literal("job"),
    job: backgroundJobSchema,
    dueAt: z.number(),
    attempts: z.number().int().min(0),
  }),
  z.object({
    t: z.literal("jobretry"),
    id: z.string(),
    dueAt: z.number(),
    attempts: z.number().int().min(0),
  }),
  z.object({ t: z.literal("jobdone"), id: z.string() }),
  z.object({ t: z.literal("completed"), ids: z.array(z.string()) }),
]);

export type JournalRecord = z.infer<typeof journalRecordSchema>;

/** Parses caller input or throws InvalidParamsError naming the field (`turn.sessionKey: …`). */

/** Tunables of the local driver beyond the brief's required options; every field has a default. */
export const localTuningSchema = z.object({
  /** Global cap on running jobs (turns and background jobs together). */
  concurrency: z.number().int().min(1).max(1024),
  mode: z.enum(["collect", "followup"]),
  /** fdatasync the journal after each batch write (survives an OS crash, not just a process crash). */
  fsync: z.boolean().default(true),
  /**
   * Compact the journal after this many appended records (and at least a quarter of its live
   * records): a turn writes about three, so the default keeps ~16k turns of history at most.
   */
  compactEveryAppends: z.number().int().min(1).default(50_000),
  /** Completed background job ids remembered for idempotency (oldest forgotten first). */
  completedJobIds: z.number().int().min(1).default(10_000),
  /** Failed background job: attempts in total before it is dropped (RetryLaterError does not count). */
  jobMaxAttempts: z.number().int().min(1).default(3),
  /** Backoff before retry n (1-based) of a failed background job: retryBaseMs × 2^(n-1). */
  retryBaseMs: z.number().int().min(0).default(1000),
  /** After a shutdown aborts in-flight jobs, how long stop() waits for their handlers to return. */
  abortSettleMs: z.number().int().min(0).default(1000),
});

export type LocalTuning = z.output<typeof localTuningSchema>;
export type LocalTuningInput = z.input<typeof localTuningSchema>;
