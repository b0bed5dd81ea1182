import { randomUUID } from "node:crypto";
import path from "node:path";
import { errorMessage, formatIssues, InvalidParamsError, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { settleWithin } from "../../retry/index.js";
import { FINAL_RUN_STATUSES, type RunRecord, type RunStore } from "../../store/types.js";
import { backgroundJobSchema, parseInput, singleFlight, turnRequestSchema } from "../schema.js";
import {
  type BackgroundJob,
  type JobHandlers,
  type Pipeline,
  queuedRecord,
  type RunEvent,
  type SessionQueueInfo,
  type TurnRequest,
} from "../types.js";
import { BackgroundQueue } from "./background.js";
import { JobRunner } from "./job-runner.js";
import { type JournalStats, QueueJournal } from "./journal.js";
import type { LiveTurn } from "./journal-model.js";
import { type LaneEntry, LaneScheduler } from "./lanes.js";
import { type LocalTuning, localTuningSchema } from "./schema.js";
import { TurnRunner } from "./turn-runner.js";
import { RunWaiters } from "./waiters.js";

/**
 * The embedded pipeline driver: session lanes and background jobs in this process, made durable
 * by a journal under `<stateDir>/queue/`. Same observable semantics as the BullMQ driver (both run
 * `test/contract/pipeline.ts`); see `src/pipeline/types.ts` for the contract.
 *
 * Durability: `submitTurn`/`submit` resolve only after the request is in the journal (and the run
 * record is in the RunStore). On start the journal is replayed: queued turns are re-queued in
 * arrival order, a turn that was running (crash, or aborted by `stop`) is re-run with `attempt`
 * incremented (at-least-once), and pending/delayed background jobs resume at their due time.
 * Records whose loss only means such a re-run (`start`, `done`, job completion) are not awaited.
 * A turn with follow-ups commits them with its outcome in one awaited `final` record (turn-runner.ts);
 * replay applies a committed outcome instead of re-running the turn, and relays follow-ups that
 * were not yet `relayed` (each submit idempotent by its id).
 */

export interface LocalPipelineOptions {
  stateDir: string;
  runs: RunStore;
  logger: Logger;
  /** Jobs (turns + background) running at once. */
  concurrency: number;
  mode: "collect" | "followup";
  now?: () => number;
  /** Optional tunables, defaults in `localTuningSchema`. */
  fsync?: boolean;
  compactEveryAppends?: number;
  completedJobIds?: number;
  jobMaxAttempts?: number;
  retryBaseMs?: number;
  abortSettleMs?: number;
}

export interface LocalPipeline extends Pipeline {
  readonly driver: "local";
  /** Journal size and live bytes (for health/metrics and tests). */
  journalStats(): JournalStats;
  /** Problems met while replaying the journal (torn or unreadable lines). */
  warnings(): string[];
}

export function createLocalPipeline(opts: LocalPipelineOptions): LocalPipeline {
  const { stateDir, runs, logger, now, ...rest } = opts;
  const parsed = localTuningSchema.safeParse(rest);
  if (!parsed.success) throw new InvalidParamsError(formatIssues(parsed.error.issues, "queue."));
  if (!stateDir) throw new InvalidParamsError("stateDir: required");
  return new LocalPipelineImpl(path.join(stateDir, "queue"), runs, logger, now ?? Date.now, parsed.data);
}

type State = "idle" | "started" | "stopping" | "stopped";

/** Pause before relaying follow-ups again after a submit failed (journal write refused). */
const RELAY_RETRY_MS = 1000;

class LocalPipelineImpl implements LocalPipeline {
  readonly driver = "local" as const;
  private state: State = "idle";
  private handlers: JobHandlers | null = null;
  private journal: QueueJournal | null = null;
  private opening: Promise<QueueJournal> | null = null;
  private stopping: Promise<void> | null = null;
  private readonly lanes: LaneScheduler;
  private readonly bg: BackgroundQueue;
  /** Accepted turns not yet taken into a run, by runId. */
  private readonly queued = new Map<string, LaneEntry>();
  private readonly turns: TurnRunner;
  private readonly jobs: JobRunner;
  private readonly waiters: RunWaiters;
  /** Submissions not yet durable, so duplicates and cancels can join them. */
  private readonly submitting = new Map<string, Promise<RunRecord>>();
  private readonly jobSubmitting = new Map<string, Promise<void>>();
  private readonly inflight = new Set<Promise<void>>();
  private readonly listeners = new Set<(event: RunEvent) => void>();
  /** Slots taken (turns and background jobs). */
  private running = 0;
  /** Turns that handed their slot back and are still writing their outcome (see `track`). */
  private finishing = 0;
  private preferBackground = false;
  private relaying: Promise<void> | null = null;
  private relayAgain = false;
  private relayTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dir: string,
    private readonly runs: RunStore,
    private readonly logger: Logger,
    private readonly now: () => number,
    private readonly tuning: LocalTuning,
  ) {
    this.lanes = new LaneScheduler(tuning.mode);
    this.bg = new BackgroundQueue(now, () => this.pump());
    this.waiters = new RunWaiters(runs);
    const journal = () => this.journal;
    const handlers = () => this.handlers;
    this.turns = new TurnRunner({
      runs,
      logger,
      now,
      journal,
      handlers,
      onStarted: (run) => this.emit({ type: "run.started", run }),
      onFinished: (run) => {
        this.emit({ type: "run.finished", run });
        this.waiters.notify(run);
      },
      relay: () => this.relay(),
    });
    this.jobs = new JobRunner({
      logger,
      now,
      journal,
      handlers,
      queue: this.bg,
      policy: { maxAttempts: tuning.jobMaxAttempts, baseMs: tuning.retryBaseMs },
    });
  }

  // ---------------------------------------------------------------------------------------------
  // lifecycle

  async start(handlers: JobHandlers): Promise<void> {
    if (this.state === "started" || this.handlers) {
      this.logger.warn("local pipeline: start() called twice; ignored");
      return;
    }
    this.assertOpenForWork();
    this.handlers = handlers;
    try {
      await this.open();
    } catch (err) {
      this.handlers = null;
      throw err;
    }
    this.assertOpenForWork();
    this.state = "started";
    this.pump();
  }

  stop(graceMs = 5000): Promise<void> {
    this.stopping ??= this.shutdown(graceMs);
    return this.stopping;
  }

  private async shutdown(graceMs: number): Promise<void> {
    this.state = "stopping";
    this.bg.stop();
    clearTimeout(this.relayTimer);
    await settleWithin(this.inflight, graceMs);
    this.turns.shutdownAll();
    this.jobs.shutdownAll();
    await settleWithin(this.inflight, this.tuning.abortSettleMs);
    const journal = this.journal ?? (await this.opening?.catch(() => null));
    await journal?.close();
    this.state = "stopped";
  }

  private closing(): boolean {
    return this.state === "stopping" || this.state === "stopped";
  }

  private assertOpenForWork(): void {
    if (this.state === "stopping" || this.state === "stopped") {
      throw new SwitchboardError("UNAVAILABLE", "local pipeline is stopped; create a new one to restart");
    }
  }

  /** Replays the journal once; every entry point awaits it, so replayed work precedes new work. */
  private open(): Promise<QueueJournal> {
    if (this.journal) return Promise.resolve(this.journal);
    this.opening ??= this.replay().catch((err) => {
      this.opening = null;
      throw err;
    });
    return this.opening;
  }

  private async replay(): Promise<QueueJournal> {
    const journal = await QueueJournal.open({
      dir: this.dir,
      logger: this.logger,
      fsync: this.tuning.fsync,
      compactEveryAppends: this.tuning.compactEveryAppends,
      completedCap: this.tuning.completedJobIds,
    });
    const live = [...journal.model.turns.values()];
    const records = await mapChunked(live, 256, (t) => this.runs.get(t.runId));
    const alreadyFinal: string[] = [];
    const committed: LiveTurn[] = [];
    /** Runs journaled whose record a crash lost (it rode with a write that never came). */
    const lost: RunRecord[] = [];
    live.forEach((t, i) => {
      // A `done` record lost in a crash: the RunStore already has the outcome, do not re-run.
      const rec = records[i];
      if (rec && FINAL_RUN_STATUSES.has(rec.status)) {
        alreadyFinal.push(t.runId);
        return;
      }
      // Committed (`final` record) before a crash, RunStore not written yet: finish it, no re-run.
      if (t.final) {
        committed.push(t);
        return;
      }
      if (!rec) lost.push(queuedRecord(t.runId, t.req, t.createdAt));
      const entry: LaneEntry = {
        runId: t.runId,
        req: t.req,
        createdAt: t.createdAt,
        started: t.started,
        durable: true,
        removed: false,
      };
      this.queued.set(t.runId, entry);
      this.lanes.add(entry);
    });
    if (alreadyFinal.length > 0) journal.note({ t: "done", runIds: alreadyFinal });
    // before anyone can ask for them (a turn's start would recreate them anyway)
    await mapChunked(lost, 256, (r) => this.runs.put(r));
    for (const j of journal.model.jobs.values()) this.bg.schedule(j.job.id, j.dueAt);
    if (live.length > 0 || journal.model.jobs.size > 0) {
      const turns = live.length - alreadyFinal.length - committed.length;
      const byKind: Record<string, number> = {};
      for (const j of journal.model.jobs.values()) byKind[j.job.kind] = (byKind[j.job.kind] ?? 0) + 1;
      this.logger.info(
        { turns, jobs: journal.model.jobs.size, jobKinds: byKind },
        resumeMessage(turns, byKind),
      );
    }
    this.journal = journal;
    for (const t of committed) {
      const final = t.final;
      if (!final) continue;
      await this.turns.writeFinal([t], final).catch((err: unknown) => {
        this.logger.error(
          { err: errorMessage(err), runId: t.runId },
          "local pipeline: could not record a committed outcome; retried at the next start",
        );
      });
    }
    if (journal.model.outbox.size > 0) {
      this.logger.info({ runs: journal.model.outbox.size }, "local pipeline: relaying committed follow-ups");
      this.relay();
    }
    return journal;
  }

  // ---------------------------------------------------------------------------------------------
  // follow-ups (transactional outbox)

  /**
   * Submits the follow-ups of every committed turn still in the journal's outbox, then marks the
   * turn `relayed`. Each submit is idempotent by its id, so relaying again after a crash (or a
   * relay that failed half-way) never runs one twice. A failed relay is tried again in a second.
   */
  private relay(): void {
    if (this.relaying) {
      this.relayAgain = true;
      return;
    }
    this.relaying = this.relayOnce().finally(() => {
      this.relaying = null;
      if (this.relayAgain) {
        this.relayAgain = false;
        this.relay();
      }
    });
  }

  private async relayOnce(): Promise<void> {
    const journal = this.journal;
    if (!journal) return;
    for (const [key, entry] of [...journal.model.outbox]) {
      if (this.closing()) return;
      try {
        for (const f of entry.followUps) {
          if (f.type === "job") await this.submit(f.job, f.delayMs ? { delayMs: f.delayMs } : undefined);
          else await this.submitTurn(f.turn);
        }
        journal.note({ t: "relayed", runId: key });
      } catch (err) {
        if (this.closing()) return;
        this.logger.warn(
          { err: errorMessage(err), runId: key },
          "local pipeline: submitting a run's follow-ups failed; retrying",
        );
        clearTimeout(this.relayTimer);
        this.relayTimer = setTimeout(() => this.relay(), RELAY_RETRY_MS);
        this.relayTimer.unref();
        return;
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // turns: accept

  submitTurn(input: TurnRequest): Promise<RunRecord> {
    let req: TurnRequest;
    try {
      req = parseInput(turnRequestSchema, input, "turn");
      this.assertOpenForWork();
    } catch (err) {
      return Promise.reject(err);
    }
    const runId = req.runId ?? randomUUID();
    return singleFlight(this.submitting, runId, () => this.acceptTurn(runId, req));
  }

  private async acceptTurn(runId: string, req: TurnRequest): Promise<RunRecord> {
    const journal = this.journal ?? (await this.open());
    const explicit = req.runId !== undefined;
    if (
      explicit &&
      (this.queued.has(runId) || this.turns.isRunning(runId) || journal.model.turns.has(runId))
    ) {
      return (await this.runs.get(runId)) ?? queuedRecord(runId, req, this.now());
    }
    const createdAt = this.now();
    // Joins the lane now so lane order is call order; it is not taken before it is durable.
    const entry: LaneEntry = { runId, req, createdAt, started: 0, durable: false, removed: false };
    this.queued.set(runId, entry);
    this.lanes.add(entry);
    let written = false;
    try {
      if (explicit) {
        const existing = await this.runs.get(runId);
        // A "queued" record this pipeline does not hold (checked above) is a torn accept: a crash
        // wrote the run record but not the journal record. Accept it again instead of answering
        // with a run that would never start.
        if (existing && existing.status !== "queued") {
          this.dropEntry(entry);
          return existing;
        }
      }
      const rec = queuedRecord(runId, req, createdAt);
      written = true;
      const journaled = journal.append({ t: "turn", runId, createdAt, req });
      // The journal record is the durable one: a "queued" record lost in a crash is put back by
      // replay, so where the store allows it rides with the store's next write.
      const put = this.runs.putSoon ? this.runs.putSoon(rec) : this.runs.put(rec);
      await Promise.all([journaled, put]);
      this.lanes.markDurable(entry);
      this.pump();
      return { ...rec };
    } catch (err) {
      // Not accepted: the caller gets the error, and neither the lane nor a replay will run it.
      this.dropEntry(entry);
      if (written) {
        journal.note({ t: "done", runIds: [runId] });
        this.runs
          .patch(runId, { status: "error", error: `not accepted: ${errorMessage(err)}`, endedAt: this.now() })
          .catch(() => null);
      }
      throw err;
    }
  }

  private dropEntry(entry: LaneEntry): void {
    this.queued.delete(entry.runId);
    this.lanes.remove(entry);
  }

  // ---------------------------------------------------------------------------------------------
  // scheduling

  /** Starts work while slots are free, alternating lanes and background jobs so neither starves. */
  private pump(): void {
    if (this.state !== "started") return;
    while (this.running < this.tuning.concurrency) {
      const started = this.preferBackground
        ? this.startJob() || this.startTurn()
        : this.startTurn() || this.startJob();
      if (!started) return;
      this.preferBackground = !this.preferBackground;
    }
  }

  /**
   * Runs `work` in a slot. `work` may hand its slot back before it ends (`free`): a turn whose
   * handler returned only writes its outcome, so the next turn's model call need not wait for that
   * write. At most `concurrency` such turns may be finishing at once (a slow disk then holds slots
   * again); `after` (the lane's release) still waits for the end of `work`.
   */
  private track(work: (free: () => void) => Promise<void>, after: () => void): void {
    this.running++;
    let held = true;
    const free = (): void => {
      if (!held || this.finishing >= this.tuning.concurrency) return;
      held = false;
      this.finishing++;
      this.running--;
      this.pump();
    };
    const p = work(free).then(
      () => undefined,
      (err) => this.logger.error({ err: errorMessage(err) }, "local pipeline: job runner failed"),
    );
    this.inflight.add(p);
    void p.then(() => {
      this.inflight.delete(p);
      if (held) this.running--;
      else this.finishing--;
      after();
      this.pump();
    });
  }

  private startTurn(): boolean {
    const taken = this.lanes.take();
    if (!taken) return false;
    for (const e of taken.entries) this.queued.delete(e.runId);
    this.track(
      (free) => this.turns.run(taken.entries, free),
      () => this.lanes.release(taken.sessionKey),
    );
    return true;
  }

  private startJob(): boolean {
    const journal = this.journal;
    if (!journal) return false;
    for (let id = this.bg.take(); id !== null; id = this.bg.take()) {
      const live = journal.model.jobs.get(id);
      if (!live || this.jobs.isRunning(id)) continue;
      this.track(
        () => this.jobs.run(live),
        () => {},
      );
      return true;
    }
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // turns: control

  wait(runId: string, timeoutMs: number): Promise<RunRecord | null> {
    return this.waiters.wait(
      runId,
      timeoutMs,
      (id) => this.submitting.has(id) || this.queued.has(id) || this.turns.isRunning(id),
    );
  }

  async cancel(runId: string, reason: "aborted" | "timeout"): Promise<boolean> {
    await this.open();
    const pending = this.submitting.get(runId);
    if (pending) await pending.catch(() => null);
    const entry = this.queued.get(runId);
    if (entry && !entry.removed) {
      this.dropEntry(entry);
      await this.turns.finalize([entry], { status: reason });
      this.pump();
      return true;
    }
    return this.turns.abort(runId, reason);
  }

  async steer(runId: string, text: string): Promise<boolean> {
    if (typeof text !== "string" || text.length === 0) throw new InvalidParamsError("text: required");
    return this.turns.steer(runId, text);
  }

  async queueInfo(sessionKey: string): Promise<SessionQueueInfo> {
    await this.open();
    return this.lanes.info(sessionKey);
  }

  async depth(): Promise<number> {
    return this.lanes.pendingTotal();
  }

  onRunEvent(listener: (event: RunEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: RunEvent): void {
    for (const l of this.listeners) {
      try {
        l(event);
      } catch (err) {
        this.logger.warn({ err: errorMessage(err), type: event.type }, "local pipeline: run listener threw");
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // background jobs

  submit(input: BackgroundJob, opts?: { delayMs?: number }): Promise<void> {
    let job: BackgroundJob;
    try {
      job = parseInput(backgroundJobSchema, input, "job");
      const delayMs = opts?.delayMs ?? 0;
      if (!Number.isFinite(delayMs) || delayMs < 0) throw new InvalidParamsError("delayMs: must be ≥ 0");
      this.assertOpenForWork();
    } catch (err) {
      return Promise.reject(err);
    }
    const joining = this.jobSubmitting.get(job.id);
    if (joining) return joining;
    const p = this.acceptJob(job, opts?.delayMs ?? 0);
    this.jobSubmitting.set(job.id, p);
    const done = () => this.jobSubmitting.delete(job.id);
    p.then(done, done);
    return p;
  }

  private async acceptJob(job: BackgroundJob, delayMs: number): Promise<void> {
    const journal = this.journal ?? (await this.open());
    const model = journal.model;
    if (model.jobs.has(job.id) || model.completed.has(job.id)) return;
    const dueAt = this.now() + delayMs;
    try {
      await journal.append({ t: "job", job, dueAt, attempts: 0 });
    } catch (err) {
      model.discardJob(job.id);
      throw err;
    }
    this.bg.schedule(job.id, dueAt);
  }

  // ---------------------------------------------------------------------------------------------
  // introspection

  journalStats(): JournalStats {
    return this.journal?.stats() ?? { fileBytes: 0, liveBytes: 0, compactions: 0, writes: 0, syncs: 0 };
  }

  warnings(): string[] {
    return [...(this.journal?.warnings ?? [])];
  }
}

async function mapChunked<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size)
    out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

/** The restart line in words: what was picked up again, and what is merely scheduled. */
export function resumeMessage(turns: number, jobKinds: Record<string, number>): string {
  const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
  const turnText =
    turns > 0
      ? `resuming ${plural(turns, "turn", "turns")} accepted before the restart`
      : "no unfinished turns to resume";
  const kinds = Object.entries(jobKinds).sort(([a], [b]) => a.localeCompare(b));
  const total = kinds.reduce((n, [, c]) => n + c, 0);
  if (total === 0) return `local pipeline: ${turnText}`;
  const list = kinds.map(([k, c]) => `${c} ${k}`).join(", ");
  return `local pipeline: ${turnText}; ${plural(total, "follow-up job", "follow-up jobs")} still scheduled (${list})`;
}
