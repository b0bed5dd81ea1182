import type { z } from "zod";
import { errorMessage, formatIssues, isConnectionError } from "../errors.js";
import type { Logger } from "../log.js";
import { backoffDelayMs, retryLoop } from "../retry/index.js";
import { observeTurn } from "../telemetry/index.js";
import { type TurnMeta, type TurnMetaOf, turnMetaOf } from "./turn-meta.js";
import {
  type BackgroundJob,
  type FollowUp,
  type JobContext,
  type JobHandlers,
  type TurnJob,
  type TurnOrigin,
  type TurnOutcome,
  UnrecoverableJobError,
} from "./types.js";

/**
 * The handler registry the pipeline runs, and the job handlers built from it: a turn's body (the
 * agent's turn with its chat side, `agent/turn-handler.ts`), then the after-turn hooks of the
 * turn's origin (the flows in `src/flows/`, `src/subagents/`, `src/cron/` register them), whose
 * follow-ups go back with the outcome to be committed with the run's final status; and the
 * background jobs dispatched by kind.
 */

export const REPLY_SKIP = "REPLY_SKIP";
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";
/** A scheduled or webhook turn that has nothing to say replies exactly this (cron, hooks). */
export const NO_REPLY = "NO_REPLY";

/**
 * Runs when a turn of its origin has its outcome, before the run is final, with the turn's meta
 * read for that origin (turn-meta.ts). It PLANS the work the run causes and returns it as
 * follow-ups (jobs, turns) — it does not submit them: the pipeline commits them with the run's
 * final status in one atomic step and submits them after (transactional outbox), so a crash or a
 * failing queue can never leave an `ok` run without its follow-ups. A hook may read, and may do
 * what is idempotent by the run id and bound to its reply (a delivery keyed `hook:<runId>`, the
 * cron run log), since a re-run after a crash calls it again.
 */
export type AfterTurnHook<M extends TurnMeta = TurnMeta> = (
  job: TurnJob,
  outcome: TurnOutcome,
  meta: M,
) => Promise<FollowUp[]>;
/** A hook for every turn whatever its origin (and whatever its meta holds): a yield. */
export type EveryTurnHook = (job: TurnJob, outcome: TurnOutcome) => Promise<FollowUp[]>;
/**
 * Called when the pipeline prepares a turn (JobHandlers.prepareTurn): a flow may start a read its
 * after-turn hook needs, keyed by the job object (the hook gets the same one), so that it rides
 * beside the turn's first round trip. It writes nothing; its hook reads again when it was not
 * called (a pipeline that does not prepare) or its read failed.
 */
export type BeforeTurnHook = (job: TurnJob) => void;
export type BackgroundHandler = (job: BackgroundJob, ctx: JobContext) => Promise<void>;

/** One registered after-turn hook: for the turns of `origins`, or of every origin (null). */
export type AfterTurnEntry =
  | { origins: readonly TurnOrigin[]; hook: AfterTurnHook }
  | { origins: null; hook: EveryTurnHook };

export interface HandlerRegistry {
  beforeTurn: BeforeTurnHook[];
  /** In registration order; see `onTurnEnd` and `onEveryTurnEnd`. */
  afterTurn: AfterTurnEntry[];
  background: Partial<Record<BackgroundJob["kind"], BackgroundHandler>>;
}

/** Registers an after-turn hook for the turns of `origins`; it gets their meta typed. */
export function onTurnEnd<O extends TurnOrigin>(
  registry: HandlerRegistry,
  origins: readonly O[],
  hook: AfterTurnHook<TurnMetaOf<O>>,
): void {
  // the loop calls it only with a meta of one of `origins` (runAfterTurn)
  registry.afterTurn.push({ origins, hook: hook as AfterTurnHook });
}

/** Registers an after-turn hook for every turn (its meta is not read for it). */
export function onEveryTurnEnd(registry: HandlerRegistry, hook: EveryTurnHook): void {
  registry.afterTurn.push({ origins: null, hook });
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

/** Retries of an after-turn hook that failed because storage was unavailable (~8 s in all). */
const HOOK_RETRIES = 4;

/**
 * The after-turn hooks of the turn's origin, in registration order, each retried while storage
 * is unavailable. Their follow-ups (reply-back, announces, wake-ups) ride on the outcome; the
 * pipeline commits them with the final status (one journal record / one Lua script) and submits
 * them after, so a failing queue can no longer lose them. A hook that keeps failing (storage
 * down) is never swallowed: the run does not end "ok" then. A meta its origin cannot read skips
 * that origin's hooks (logged); the hooks of every turn still run.
 */
export async function runAfterTurn(
  registry: HandlerRegistry,
  job: TurnJob,
  outcome: TurnOutcome,
  signal: AbortSignal,
  logger: Logger,
): Promise<TurnOutcome> {
  const reading = turnMetaOf(job);
  if (!reading.ok)
    logger.warn(
      { runId: job.runId, origin: reading.origin, why: reading.error },
      "malformed turn metadata; the follow-ups of its origin are skipped",
    );
  const failures: string[] = [];
  const followUps: FollowUp[] = [];
  for (const [i, entry] of registry.afterTurn.entries()) {
    const { hook } = entry;
    let call: () => Promise<FollowUp[]>;
    if (entry.origins === null) call = () => entry.hook(job, outcome);
    else if (reading.ok && entry.origins.includes(reading.meta.origin)) {
      const meta = reading.meta;
      call = () => entry.hook(job, outcome, meta);
    } else continue;
    try {
      const planned = await retryLoop(call, {
        delayFor: (err, attempt) =>
          isConnectionError(err) && attempt < HOOK_RETRIES
            ? backoffDelayMs(attempt, { baseDelayMs: 200, maxDelayMs: 4000 })
            : undefined,
        signal,
        onRetry: ({ retry, delayMs, err }) =>
          logger.warn(
            { err: errorMessage(err), runId: job.runId, hook: hook.name || i, retry, delayMs },
            "after-turn hook failed; retrying",
          ),
      });
      followUps.push(...planned);
    } catch (err) {
      logger.error({ err, runId: job.runId, hook: hook.name || i }, "after-turn hook failed");
      failures.push(`${hook.name || `hook ${i}`}: ${errorMessage(err)}`);
    }
  }
  const result: TurnOutcome = followUps.length > 0 ? { ...outcome, followUps } : outcome;
  if (failures.length > 0 && outcome.status === "ok") {
    return {
      ...result,
      status: "error",
      error: `the turn finished but its follow-up failed (${failures.join("; ")})`,
    };
  }
  return result;
}

/** A turn's own work, before its after-turn hooks: the agent's turn with its chat side (agent/turn-handler.ts). */
export interface TurnBody {
  /** JobHandlers.prepareTurn: start the reads the turn begins with; writes nothing, throws nothing. */
  prepare?(job: TurnJob): void;
  run(job: TurnJob, ctx: JobContext): Promise<TurnOutcome>;
}

/**
 * The handlers a pipeline runs: a turn is its body, then the after-turn hooks of its origin; a
 * background job goes to the handler of its kind. Telemetry: the turn's span, count and duration;
 * a background job's handler finds the turn that planned it with `traceLinkOf(job.data)`.
 */
export function createJobHandlers(body: TurnBody, registry: HandlerRegistry, logger: Logger): JobHandlers {
  return {
    prepareTurn(job) {
      body.prepare?.(job);
      for (const hook of registry.beforeTurn) hook(job);
    },
    turn: (job, ctx) =>
      observeTurn(job, async () => runAfterTurn(registry, job, await body.run(job, ctx), ctx.signal, logger)),
    async background(job, ctx) {
      const handler = registry.background[job.kind];
      if (!handler) {
        logger.warn({ kind: job.kind, id: job.id }, "no handler for background job; dropped");
        return;
      }
      await handler(job, ctx);
    },
  };
}
