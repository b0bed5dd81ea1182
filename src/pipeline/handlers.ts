import type { z } from "zod";
import { formatIssues } from "../errors.js";
import {
  type BackgroundJob,
  type FollowUp,
  type JobContext,
  type TurnJob,
  type TurnOutcome,
  UnrecoverableJobError,
} from "./types.js";

/**
 * The handler registry the pipeline runs: after-turn hooks (the flows in `src/flows/` register
 * them) and background job handlers by kind. The agent's turn handler (`agent/turn-handler.ts`)
 * wraps the runtime and calls these.
 */

export const REPLY_SKIP = "REPLY_SKIP";
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";
/** A scheduled or webhook turn that has nothing to say replies exactly this (cron, hooks). */
export const NO_REPLY = "NO_REPLY";

/**
 * Runs when a turn has its outcome, before the run is final. It PLANS the work the run causes and
 * returns it as follow-ups (jobs, turns) — it does not submit them: the pipeline commits them with
 * the run's final status in one atomic step and submits them after (transactional outbox), so a
 * crash or a failing queue can never leave an `ok` run without its follow-ups. A hook may read, and
 * may do what is idempotent by the run id and bound to its reply (a delivery keyed `hook:<runId>`,
 * the cron run log), since a re-run after a crash calls it again.
 */
export type AfterTurnHook = (job: TurnJob, outcome: TurnOutcome) => Promise<FollowUp[]>;
/**
 * Called when the pipeline prepares a turn (JobHandlers.prepareTurn): a flow may start a read its
 * after-turn hook needs, keyed by the job object (the hook gets the same one), so that it rides
 * beside the turn's first round trip. It writes nothing; its hook reads again when it was not
 * called (a pipeline that does not prepare) or its read failed.
 */
export type BeforeTurnHook = (job: TurnJob) => void;
export type BackgroundHandler = (job: BackgroundJob, ctx: JobContext) => Promise<void>;

export interface HandlerRegistry {
  beforeTurn: BeforeTurnHook[];
  afterTurn: AfterTurnHook[];
  background: Partial<Record<BackgroundJob["kind"], BackgroundHandler>>;
}

/**
 * A background job kind a flow owns, with the zod schema of its data: the flow builds its jobs
 * and follow-ups through it (data typed at compile time) and registers its handler with
 * `handleJobKind` (data validated when the job runs, since it was read back from a journal/Redis).
 */
export interface JobKindDef<In, Out> {
  readonly kind: BackgroundJob["kind"];
  readonly schema: z.ZodType<Out, In>;
  job(id: string, data: In): BackgroundJob;
  /** The job as a follow-up of a run (committed with its final status). */
  followUp(id: string, data: In, delayMs?: number): FollowUp;
}

export function defineJobKind<In extends Record<string, unknown>, Out>(
  kind: BackgroundJob["kind"],
  schema: z.ZodType<Out, In>,
): JobKindDef<In, Out> {
  const job = (id: string, data: In): BackgroundJob => ({ kind, id, data: { ...data } });
  return {
    kind,
    schema,
    job,
    followUp: (id, data, delayMs) => ({ type: "job", job: job(id, data), ...(delayMs ? { delayMs } : {}) }),
  };
}

/** Registers the handler of a job kind; malformed data fails the job for good (never retried). */
export function handleJobKind<In, Out>(
  registry: HandlerRegistry,
  def: JobKindDef<In, Out>,
  handle: (data: Out, job: BackgroundJob, ctx: JobContext) => Promise<void>,
): void {
  registry.background[def.kind] = async (job, ctx) => {
    const parsed = def.schema.safeParse(job.data);
    if (!parsed.success) {
      throw new UnrecoverableJobError(
        `${def.kind} job ${job.id}: malformed data (${formatIssues(parsed.error.issues, "data.")})`,
      );
    }
    await handle(parsed.data, job, ctx);
  };
}

export function isSkipToken(text: string | undefined): boolean {
  const t = (text ?? "").trim();
  return t === REPLY_SKIP || t === ANNOUNCE_SKIP;
}

/** Cron and hook deliveries post nothing for `NO_REPLY`, `ANNOUNCE_SKIP` or `REPLY_SKIP` (exact, trimmed). */
export function isSilentReply(text: string | undefined): boolean {
  return isSkipToken(text) || (text ?? "").trim() === NO_REPLY;
}
