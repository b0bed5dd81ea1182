import { type Deadline, setDeadline } from "../deadlines.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import { FINAL_RUN_STATUSES } from "../store/types.js";
import { checkFollowUps } from "./schema.js";
import type { JobHandlers, TurnJob, TurnRequest, TurnResult } from "./types.js";

/**
 * What both queue drivers (local/turn-runner.ts, bullmq/turns.ts) do with a turn once they took
 * it: build the handler's job from the taken messages, run the handler under the turn's control
 * (cancel, timeout, steering, shutdown, a lost lock), and check what it returned. Where the runs
 * are recorded and how the outcome is committed stay with each driver.
 */

export type TurnAbort = "aborted" | "timeout";

/** One accepted message of the turn, as the driver holds it. */
export interface TakenMessage {
  runId: string;
  req: TurnRequest;
}

/** The handler's job: the first message's settings, every message with its own meta. */
export function turnJobOf(taken: readonly TakenMessage[], attempt: number): TurnJob {
  const { runId, req: first } = taken[0]!;
  const job: TurnJob = {
    runId,
    sessionKey: first.sessionKey,
    agentId: first.agentId,
    messages: taken.map(({ runId, req }) => {
      const m: TurnJob["messages"][number] = { runId, text: req.text };
      if (req.provenance) m.provenance = req.provenance;
      if (req.extraSystem !== undefined) m.extraSystem = req.extraSystem;
      if (req.meta) m.meta = req.meta;
      return m;
    }),
    deliver: first.deliver,
    origin: first.origin,
    timeoutMs: first.timeoutMs ?? 0,
    attempt,
  };
  if (first.meta) job.meta = first.meta;
  return job;
}

/**
 * A running turn's control. `outcome` (cancel, timeout) forces the final status whatever the
 * handler returns; `shutdown` (stop) and `lostLock` (bullmq: another worker owns the turn now)
 * leave it unfinalised; `done` once the handler returned, when steering and cancels no longer
 * reach it.
 */
export class TurnControl {
  readonly ac = new AbortController();
  readonly steering: string[] = [];
  outcome?: TurnAbort;
  shutdown = false;
  lostLock = false;
  done = false;

  /** Cancels or times out the turn; false when it is past reaching (returned, stopping, lost). */
  cancel(outcome: TurnAbort): boolean {
    if (this.done || this.shutdown || this.lostLock) return false;
    if (!this.outcome) {
      this.outcome = outcome;
      const msg = outcome === "timeout" ? "run timed out" : "run cancelled";
      this.ac.abort(new SwitchboardError(outcome === "timeout" ? "TIMEOUT" : "CONFLICT", msg));
    }
    return true;
  }

  /** Guidance for the turn's next model call; false when it no longer runs. */
  steer(text: string): boolean {
    if (this.done || this.outcome || this.shutdown || this.lostLock) return false;
    this.steering.push(text);
    return true;
  }

  /** stop(): aborted without a final status (handed back, or re-run after a restart). */
  stop(): void {
    if (this.done) return;
    this.shutdown = true;
    this.ac.abort(new SwitchboardError("UNAVAILABLE", "pipeline shutting down"));
  }

  /** Another worker owns the turn now: it must not write. */
  lose(): void {
    if (this.done) return;
    this.lostLock = true;
    this.ac.abort(new SwitchboardError("CONFLICT", "lost the job lock; another worker owns this turn"));
  }

  /**
   * Runs the handler with this control (its timeout armed), then marks the turn done. The result
   * has a final status, checked follow-ups, and the status a cancel or timeout forced; a handler
   * that threw or returned no final status ends as error.
   */
  async run(
    handlers: JobHandlers | null,
    job: TurnJob,
    stillOwner: () => Promise<boolean>,
  ): Promise<TurnResult> {
    let timer: Deadline | undefined;
    if (job.timeoutMs > 0) timer = setDeadline(job.timeoutMs, () => this.cancel("timeout"));
    try {
      const result = await callHandler(handlers, job, {
        signal: this.ac.signal,
        stillOwner,
        takeSteering: () => this.steering.splice(0),
      });
      return this.outcome ? { ...result, status: this.outcome } : result;
    } finally {
      timer?.cancel();
      this.done = true;
    }
  }
}

async function callHandler(
  handlers: JobHandlers | null,
  job: TurnJob,
  ctx: Parameters<JobHandlers["turn"]>[1],
): Promise<TurnResult> {
  if (!handlers) return { status: "error", error: "no turn handler" };
  try {
    const result = await handlers.turn(job, ctx);
    if (!result || !FINAL_RUN_STATUSES.has(result.status)) {
      return { status: "error", error: "turn handler returned no final status" };
    }
    return checkFollowUps(result);
  } catch (err) {
    return { status: "error", error: errorMessage(err) };
  }
}
