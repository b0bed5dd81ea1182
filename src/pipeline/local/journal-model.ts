import { OrderedSet } from "../../ordered-set.js";
import type { FinalResult } from "../schema.js";
import type { BackgroundJob, FollowUp, TurnRequest } from "../types.js";
import type { JournalRecord } from "./schema.js";

/**
 * What the journal says is still live, rebuilt by applying records in order (replay and live
 * appends use the same `apply`). A compaction's snapshot holds `snapshot()` and nothing else, so
 * the files after compaction are proportional to live work, never to history.
 */

export interface LiveTurn {
  runId: string;
  createdAt: number;
  req: TurnRequest;
  /** Executions begun (a restart re-runs it with attempt = started + 1). */
  started: number;
  /** Committed outcome (a `final` record) not yet confirmed by `done`: replay applies it, no re-run. */
  final?: FinalResult;
  bytes: number;
}

/** Follow-ups committed with a run (`final`) and not yet all submitted (`relayed`). */
export interface OutboxEntry {
  /** The runs of the turn; the first one keys the entry. */
  runIds: string[];
  result: FinalResult;
  followUps: FollowUp[];
  bytes: number;
}

export interface LiveJob {
  job: BackgroundJob;
  dueAt: number;
  /** Failed attempts so far (RetryLaterError does not count). */
  attempts: number;
  bytes: number;
}

const COMPLETED_CHUNK = 1000;

export class JournalModel {
  /** Insertion order = arrival order, which replay relies on for per-session FIFO. */
  readonly turns = new Map<string, LiveTurn>();
  readonly jobs = new Map<string, LiveJob>();
  /** Follow-ups waiting to be relayed, by the first runId of their turn, in commit order. */
  readonly outbox = new Map<string, OutboxEntry>();
  /** Recently completed background job ids, oldest first, at most `completedCap`. */
  readonly completed = new OrderedSet<string>();
  /** Bytes of the records that a snapshot would keep (approximate: string length). */
  liveBytes = 0;

  constructor(private readonly completedCap: number) {}

  apply(rec: JournalRecord, bytes: number): void {
    switch (rec.t) {
      case "turn": {
        if (this.turns.has(rec.runId)) return;
        this.turns.set(rec.runId, {
          runId: rec.runId,
          createdAt: rec.createdAt,
          req: rec.req,
          started: rec.started ?? 0,
          bytes,
        });
        this.liveBytes += bytes;
        return;
      }
      case "start":
        for (const id of rec.runIds) {
          const t = this.turns.get(id);
          if (t) t.started++;
        }
        return;
      case "done":
        for (const id of rec.runIds) {
          const t = this.turns.get(id);
          if (!t) continue;
          this.turns.delete(id);
          this.liveBytes -= t.bytes;
        }
        return;
      case "final": {
        for (const id of rec.runIds) {
          const t = this.turns.get(id);
          if (t) t.final = rec.result;
        }
        const key = rec.runIds[0]!;
        if (rec.followUps.length === 0 || this.outbox.has(key)) return;
        this.outbox.set(key, { runIds: rec.runIds, result: rec.result, followUps: rec.followUps, bytes });
        this.liveBytes += bytes;
        return;
      }
      case "relayed":
        this.relayed(rec.runId);
        return;
      case "job": {
        if (this.jobs.has(rec.job.id) || this.completed.has(rec.job.id)) return;
        this.jobs.set(rec.job.id, { job: rec.job, dueAt: rec.dueAt, attempts: rec.attempts, bytes });
        this.liveBytes += bytes;
        return;
      }
      case "jobretry": {
        const j = this.jobs.get(rec.id);
        if (!j) return;
        j.dueAt = rec.dueAt;
        j.attempts = rec.attempts;
        return;
      }
      case "jobdone": {
        const j = this.jobs.get(rec.id);
        if (j) {
          this.jobs.delete(rec.id);
          this.liveBytes -= j.bytes;
        }
        this.remember(rec.id);
        return;
      }
      case "completed":
        for (const id of rec.ids) this.remember(id);
        return;
    }
  }

  /** Forgets a job whose `job` record failed to reach the disk (its submit rejected). */
  discardJob(id: string): void {
    const j = this.jobs.get(id);
    if (!j) return;
    this.jobs.delete(id);
    this.liveBytes -= j.bytes;
  }

  /** Forgets a `final` record that failed to reach the disk (the commit rejected). */
  discardFinal(runIds: readonly string[]): void {
    for (const id of runIds) {
      const t = this.turns.get(id);
      if (t) delete t.final;
    }
    this.relayed(runIds[0] ?? "");
  }

  private relayed(key: string): void {
    const o = this.outbox.get(key);
    if (!o) return;
    this.outbox.delete(key);
    this.liveBytes -= o.bytes;
  }

  /** Records a snapshot holds (to scale the compaction threshold with the live state). */
  records(): number {
    return (
      this.turns.size + this.jobs.size + this.outbox.size + Math.ceil(this.completed.size / COMPLETED_CHUNK)
    );
  }

  /**
   * The live state as records that replay to it, in order. Fresh objects holding copies of the
   * mutable counters (the shared journal serialises them later, in slices).
   */
  snapshot(): JournalRecord[] {
    const out: JournalRecord[] = [];
    if (this.completed.size > 0) {
      const ids = [...this.completed];
      for (let i = 0; i < ids.length; i += COMPLETED_CHUNK) {
        out.push({ t: "completed", ids: ids.slice(i, i + COMPLETED_CHUNK) });
      }
    }
    for (const t of this.turns.values()) {
      const rec: JournalRecord = { t: "turn", runId: t.runId, createdAt: t.createdAt, req: t.req };
      if (t.started > 0) rec.started = t.started;
      out.push(rec);
    }
    for (const j of this.jobs.values()) {
      out.push({ t: "job", job: j.job, dueAt: j.dueAt, attempts: j.attempts });
    }
    // After the turns, so a `final` lands on its live turn; one record per outbox entry, and one
    // per committed turn whose follow-ups are already relayed.
    const covered = new Set<string>();
    for (const [, o] of this.outbox) {
      for (const id of o.runIds) covered.add(id);
      out.push({ t: "final", runIds: o.runIds, result: o.result, followUps: o.followUps });
    }
    for (const t of this.turns.values()) {
      if (!t.final || covered.has(t.runId)) continue;
      out.push({ t: "final", runIds: [t.runId], result: t.final, followUps: [] });
    }
    return out;
  }

  private remember(id: string): void {
    this.completed.add(id);
    if (this.completed.size > this.completedCap) this.completed.shift();
  }
}
