import { type Deadline, setDeadline } from "../../deadlines.js";
import { errorMessage, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { FINAL_RUN_STATUSES, type RunRecord, type RunStore } from "../../store/types.js";
import { checkFollowUps, finalResultOf } from "../schema.js";
import { type JobContext, type JobHandlers, queuedRecord, type TurnJob, type TurnResult } from "../types.js";
import type { QueueJournal } from "./journal.js";
import type { LaneEntry } from "./lanes.js";

/**
 * Runs one taken turn: run records (running → final), the handler with its JobContext, timeout,
 * cancel, steering and shutdown. A collected turn carries several runIds; all of them share the
 * one outcome, and cancelling any of them cancels the turn.
 */

export interface TurnRunnerDeps {
  runs: RunStore;
  logger: Logger;
  now: () => number;
  journal: () => QueueJournal | null;
  handlers: () => JobHandlers | null;
  onStarted: (run: RunRecord) => void;
  onFinished: (run: RunRecord) => void;
  /** A turn committed follow-ups (in the journal's outbox): submit them now. */
  relay: () => void;
}

interface ActiveTurn {
  ac: AbortController;
  steering: string[];
  /** Set by cancel or timeout; forces the final status whatever the handler returns. */
  outcome?: "aborted" | "timeout";
  /** Aborted by stop(): not finalised, so the journal still holds it and a restart re-runs it. */
  shutdown: boolean;
}

export class TurnRunner {
  /** Running turns by every runId they carry. */
  private readonly active = new Map<string, ActiveTurn>();

  constructor(private readonly d: TurnRunnerDeps) {}

  isRunning(runId: string): boolean {
    return this.active.has(runId);
  }

  /** Cancel or time out a running turn. false when `runId` is not running here (or is shutting down). */
  abort(runId: string, outcome: "aborted" | "timeout"): boolean {
    const a = this.active.get(runId);
    if (!a || a.shutdown) return false;
    this.abortTurn(a, outcome);
    return true;
  }

  steer(runId: string, text: string): boolean {
    const a = this.active.get(runId);
    if (!a || a.outcome || a.shutdown) return false;
    a.steering.push(text);
    return true;
  }

  /** stop(): abort every running turn without finalising it. */
  shutdownAll(): void {
    for (const a of new Set(this.active.values())) {
      a.shutdown = true;
      a.ac.abort(new SwitchboardError("UNAVAILABLE", "pipeline shutting down"));
    }
  }

  /**
   * `handlerDone`: called once the handler returned (with any status) and the turn only writes
   * its outcome; the pipeline then lends the turn's slot to the next one (the lane stays taken
   * until this resolves). Not called when `stop` aborted the turn or its run records failed.
   */
  async run(entries: LaneEntry[], handlerDone: () => void = () => {}): Promise<void> {
    const runIds = entries.map((e) => e.runId);
    const attempt = entries.reduce((m, e) => Math.max(m, e.started), 0) + 1;
    for (const e of entries) e.started = attempt;
    const active: ActiveTurn = { ac: new AbortController(), steering: [], shutdown: false };
    for (const id of runIds) this.active.set(id, active);
    // Not awaited: if it is lost in a crash the re-run only under-reports `attempt`.
    this.d.journal()?.note({ t: "start", runIds }, true);
    let timer: Deadline | undefined;
    try {
      const startedAt = this.d.now();
      const started = await Promise.all(entries.map((e) => this.markRunning(e, startedAt)));
      for (const run of started) this.d.onStarted(run);
      const timeoutMs = entries[0]!.req.timeoutMs ?? 0;
      if (timeoutMs > 0) {
        timer = setDeadline(timeoutMs, () => this.abortTurn(active, "timeout"));
      }
      let result = await this.callHandler(turnJob(entries, attempt), {
        signal: active.ac.signal,
        stillOwner: async () => !active.shutdown,
        takeSteering: () => active.steering.splice(0),
      });
      timer?.cancel();
      // The handler is done: from here steer/cancel no longer reach this turn.
      for (const id of runIds) this.active.delete(id);
      if (active.shutdown) return;
      handlerDone();
      if (active.outcome) result = { ...result, status: active.outcome };
      await this.finalize(entries, result);
    } catch (err) {
      // RunStore failure around the handler: record an error if the store lets us; if it does not,
      // the turn stays in the journal and is re-run after a restart.
      this.d.logger.error({ err: errorMessage(err), runIds }, "local pipeline: turn bookkeeping failed");
      if (!active.shutdown) {
        // Once committed, the outcome stands (its follow-ups are relayed): write it, never "error".
        const committed = this.committed(runIds);
        const retry = committed
          ? this.writeFinal(entries, committed)
          : this.finalize(entries, { status: "error", error: `pipeline: ${errorMessage(err)}` });
        await retry.catch(() => {});
      }
    } finally {
      timer?.cancel();
      for (const id of runIds) this.active.delete(id);
    }
  }

  /**
   * Commits the outcome of every run of the turn. Without follow-ups: the RunStore, then `done`
   * (a lost `done` only means replay finds the final record and skips the turn). With follow-ups
   * (transactional outbox): first ONE durable `final` record holding the outcome and the
   * follow-ups — the commit point — then the RunStore, `done`, and the relay that submits them.
   * A crash after the `final` record is finished by replay (outcome re-applied, follow-ups relayed),
   * never by re-running the turn; a `final` record that cannot be written fails the commit.
   */
  async finalize(entries: LaneEntry[], result: TurnResult): Promise<void> {
    const runIds = entries.map((e) => e.runId);
    const followUps = result.followUps ?? [];
    const outcome = finalResultOf(result);
    if (followUps.length > 0) {
      const journal = this.d.journal();
      if (!journal) throw new SwitchboardError("UNAVAILABLE", "pipeline journal is not open");
      try {
        await journal.append({ t: "final", runIds, result: outcome, followUps });
      } catch (err) {
        journal.model.discardFinal(runIds);
        throw err;
      }
      // Committed: the follow-ups are relayed even if the RunStore write below fails.
      try {
        await this.writeFinal(entries, outcome);
      } finally {
        this.d.relay();
      }
      return;
    }
    await this.writeFinal(entries, outcome);
  }

  /** The outcome committed for this turn (`final` record), if any. */
  private committed(runIds: readonly string[]): TurnResult | undefined {
    return this.d.journal()?.model.turns.get(runIds[0] ?? "")?.final;
  }

  /** The RunStore records of a committed outcome, `done`, then each run reported. */
  async writeFinal(
    entries: Array<Pick<LaneEntry, "runId" | "req" | "createdAt">>,
    result: TurnResult,
  ): Promise<void> {
    const patch: Partial<RunRecord> = { ...finalResultOf(result), endedAt: this.d.now() };
    const finals = await Promise.all(
      entries.map(async (e) => {
        const rec = await this.d.runs.patch(e.runId, patch);
        if (rec) return rec;
        const full: RunRecord = { ...queuedRecord(e.runId, e.req, e.createdAt), ...patch };
        await this.d.runs.put(full);
        return full;
      }),
    );
    // Not awaited: if it is lost in a crash, replay finds the final RunStore record and skips it.
    this.d.journal()?.note({ t: "done", runIds: entries.map((e) => e.runId) }, true);
    for (const run of finals) this.d.onFinished(run);
  }

  private abortTurn(active: ActiveTurn, outcome: "aborted" | "timeout"): void {
    if (active.outcome || active.shutdown) return;
    active.outcome = outcome;
    const msg = outcome === "timeout" ? "run timed out" : "run cancelled";
    active.ac.abort(new SwitchboardError(outcome === "timeout" ? "TIMEOUT" : "CONFLICT", msg));
  }

  private async callHandler(job: TurnJob, ctx: JobContext): Promise<TurnResult> {
    const handlers = this.d.handlers();
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

  private async markRunning(e: LaneEntry, startedAt: number): Promise<RunRecord> {
    // Not waited for on disk where the store allows: lost in a crash, the turn is re-run anyway.
    const runs = this.d.runs;
    const patch: Partial<RunRecord> = { status: "running", startedAt };
    const rec = await (runs.patchSoon ? runs.patchSoon(e.runId, patch) : runs.patch(e.runId, patch));
    if (rec) return rec;
    // Journaled but the record never landed (crash between the two writes): recreate it.
    const full: RunRecord = { ...queuedRecord(e.runId, e.req, e.createdAt), status: "running", startedAt };
    await this.d.runs.put(full);
    return full;
  }
}

function turnJob(entries: LaneEntry[], attempt: number): TurnJob {
  const first = entries[0]!;
  const job: TurnJob = {
    runId: first.runId,
    sessionKey: first.req.sessionKey,
    agentId: first.req.agentId,
    messages: entries.map((e) => {
      const m: TurnJob["messages"][number] = { runId: e.runId, text: e.req.text };
      if (e.req.provenance) m.provenance = e.req.provenance;
      if (e.req.extraSystem !== undefined) m.extraSystem = e.req.extraSystem;
      if (e.req.meta) m.meta = e.req.meta;
      return m;
    }),
    deliver: first.req.deliver,
    origin: first.req.origin,
    timeoutMs: first.req.timeoutMs ?? 0,
    attempt,
  };
  if (first.req.meta) job.meta = first.req.meta;
  return job;
}
