import { errorMessage, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { RunRecord, RunStore } from "../../store/types.js";
import { finalResultOf } from "../schema.js";
import { type TurnAbort, TurnControl, turnJobOf } from "../turn-core.js";
import { type JobHandlers, queuedRecord, type TurnResult } from "../types.js";
import type { QueueJournal } from "./journal.js";
import type { LaneEntry } from "./lanes.js";

/**
 * Runs one taken turn: run records (running → final) and the commit of its outcome around the
 * handler, which runs under the turn's control (turn-core.ts: timeout, cancel, steering,
 * shutdown). A collected turn carries several runIds; all of them share the one outcome, and
 * cancelling any of them cancels the turn.
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

export class TurnRunner {
  /** Running turns by every runId they carry. */
  private readonly active = new Map<string, TurnControl>();

  constructor(private readonly d: TurnRunnerDeps) {}

  isRunning(runId: string): boolean {
    return this.active.has(runId);
  }

  /** Cancel or time out a running turn. false when `runId` is not running here (or is shutting down). */
  abort(runId: string, outcome: TurnAbort): boolean {
    return this.active.get(runId)?.cancel(outcome) ?? false;
  }

  steer(runId: string, text: string): boolean {
    return this.active.get(runId)?.steer(text) ?? false;
  }

  /** stop(): abort every running turn without finalising it (the journal still holds it: a restart re-runs it). */
  shutdownAll(): void {
    for (const a of new Set(this.active.values())) a.stop();
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
    const active = new TurnControl();
    for (const id of runIds) this.active.set(id, active);
    // Not awaited: if it is lost in a crash the re-run only under-reports `attempt`.
    this.d.journal()?.note({ t: "start", runIds }, true);
    try {
      const startedAt = this.d.now();
      const started = await Promise.all(entries.map((e) => this.markRunning(e, startedAt)));
      for (const run of started) this.d.onStarted(run);
      const result = await active.run(
        this.d.handlers(),
        turnJobOf(entries, attempt),
        async () => !active.shutdown,
      );
      // The handler is done: from here steer/cancel no longer reach this turn.
      for (const id of runIds) this.active.delete(id);
      if (active.shutdown) return;
      handlerDone();
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
