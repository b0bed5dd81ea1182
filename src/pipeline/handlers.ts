import type { TurnOutcome } from "../agent/runtime.js";
import type { BackgroundJob, FollowUp, JobContext, TurnJob } from "./types.js";

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
export type BackgroundHandler = (job: BackgroundJob, ctx: JobContext) => Promise<void>;

export interface HandlerRegistry {
  afterTurn: AfterTurnHook[];
  background: Partial<Record<BackgroundJob["kind"], BackgroundHandler>>;
}

export function isSkipToken(text: string | undefined): boolean {
  const t = (text ?? "").trim();
  return t === REPLY_SKIP || t === ANNOUNCE_SKIP;
}

/** Cron and hook deliveries post nothing for `NO_REPLY`, `ANNOUNCE_SKIP` or `REPLY_SKIP` (exact, trimmed). */
export function isSilentReply(text: string | undefined): boolean {
  return isSkipToken(text) || (text ?? "").trim() === NO_REPLY;
}
