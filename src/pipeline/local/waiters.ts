import { type Deadline, setDeadline } from "../../deadlines.js";
import { FINAL_RUN_STATUSES, type RunRecord, type RunStore } from "../../store/types.js";

/**
 * `Pipeline.wait`: event-driven, never polling. The waiter subscribes first and then reads the
 * RunStore, so a run that finished long ago (or before a restart) resolves from its record, and a
 * run finishing in between is not missed. A timeout only ends the wait; it never touches the run.
 */
export class RunWaiters {
  private readonly waiters = new Map<string, Set<(run: RunRecord | null) => void>>();

  constructor(private readonly runs: RunStore) {}

  /** `isLive(runId)`: accepted here but maybe not in the RunStore yet (keeps an unknown-looking run waiting). */
  wait(runId: string, timeoutMs: number, isLive: (runId: string) => boolean): Promise<RunRecord | null> {
    const waitMs = Number.isNaN(timeoutMs) ? 0 : Math.max(0, timeoutMs);
    return new Promise<RunRecord | null>((resolve, reject) => {
      let settled = false;
      let timer: Deadline | undefined;
      const set = this.waiters.get(runId) ?? new Set();
      const finish = (rec: RunRecord | null) => {
        if (settled) return;
        settled = true;
        timer?.cancel();
        set.delete(finish);
        if (set.size === 0 && this.waiters.get(runId) === set) this.waiters.delete(runId);
        resolve(rec);
      };
      const fail = (err: unknown) => {
        finish(null);
        reject(err);
      };
      set.add(finish);
      this.waiters.set(runId, set);
      if (waitMs > 0) {
        // A pending wait does not keep a stopping process alive (`setDeadline` never does).
        timer = setDeadline(waitMs, () => {
          this.runs.get(runId).then(finish, fail);
        });
      }
      this.runs.get(runId).then((rec) => {
        if (rec && FINAL_RUN_STATUSES.has(rec.status)) finish(rec);
        else if (waitMs === 0) finish(rec);
        else if (!rec && !isLive(runId)) finish(null);
      }, fail);
    });
  }

  /** A run reached its final status: resolve everyone waiting for it. */
  notify(run: RunRecord): void {
    const set = this.waiters.get(run.runId);
    if (set) for (const w of [...set]) w(run);
  }
}
