import { DelayedError, type Job, UnrecoverableError, WaitingError } from "bullmq";
import { errorMessage } from "../../errors.js";
import { ackTurn, checkOwner, commitTurn, extendTurn, takeTurn } from "../../redis/commands/pipeline.js";
import { FINAL_RUN_STATUSES, type RunRecord } from "../../store/types.js";
import { type FinalResult, finalResultOf } from "../schema.js";
import { type TurnAbort, TurnControl, turnJobOf } from "../turn-core.js";
import { canCollect, queuedRecord, type TurnResult } from "../types.js";
import { type DriverContext, eventMessage } from "./context.js";
import { relayQuietly } from "./outbox.js";
import {
  committedSchema,
  drainDataSchema,
  type Envelope,
  envelopeSchema,
  type OutboxEntry,
  parseStored,
} from "./schema.js";

/**
 * The drain job of one session: takes ONE turn from the session's mailbox (or resumes the turn a
 * dead worker left in `act`), runs the handler, commits the outcome behind a fence, then
 * re-enqueues itself at the tail of the queue (`moveToDelayed(now)`: delayed jobs are promoted to
 * the back of the wait list) if the mailbox is not empty — so busy sessions take turns
 * round-robin, with one BullMQ job per burst rather than per message.
 *
 * Commit order: (1) fence: this worker still holds the BullMQ job lock (a worker that stalled past
 * its lock was replaced and must not write), (1b) when the turn caused follow-ups, the
 * transactional outbox: ONE fenced script (`commitTurn-3`) writes the outcome onto `act` and
 * pushes the follow-ups onto `{tag}:outbox` — from here the outcome and its follow-ups are
 * durable together, (2) final run records to the RunStore — from here this process's waiters and
 * listeners have them (run.finished), while (3) goes out: the ack script, again fenced, clears
 * `act`, marks the runs done, publishes run.finished to the others, (4) the relay submits this
 * turn's follow-ups (outbox.ts). A crash between (1b) and (3) leaves `act` with its outcome: the
 * next drain applies it (no re-run) and relays; a crash after (3) leaves the entries to the sweep.
 * A crash between (2) and (3) without follow-ups: the next drain finds the records final and only
 * acks.
 * The RunStore is a separate store, so (1)→(2) is not one atomic step: a worker that loses its lock
 * in the few milliseconds between them can still write. That window is the limit of the fence.
 */

/**
 * Who drains the session: a BullMQ drain job, or this process running a turn it just accepted
 * (direct.ts). `id` names the lock key that fences the turn (`keys.lock(id)`), `token` its value.
 */
export interface DrainHold {
  readonly id: string;
  readonly token: string;
  /** Lock ms for takeTurn to set (a direct turn); 0: BullMQ holds the job's lock. */
  readonly lockMs: number;
  /** The turn was taken: from here its lock exists and must be kept alive. */
  taken(): void;
  /** Messages are left after the turn: the next drain takes them (BullMQ: back at the tail). */
  next(): Promise<void>;
  /** Stopping mid-turn: the turn goes back, untouched, for another drain to resume. */
  handBack(): Promise<void>;
}

/** The hold of a BullMQ drain job (its methods end the job as BullMQ expects: by throwing). */
function jobHold(job: Job, token: string): DrainHold {
  return {
    id: job.id ?? "",
    token,
    lockMs: 0,
    taken: () => undefined,
    next: async () => {
      await job.moveToDelayed(Date.now(), token);
      throw new DelayedError();
    },
    handBack: async () => {
      await job.moveToWait(token);
      throw new WaitingError();
    },
  };
}

/** Counters of this process's turns; `direct`: taken directly (direct.ts), not by a drain job. */
export interface TurnStats {
  turns: number;
  resumed: number;
  fenced: number;
  handedBack: number;
  direct: number;
}

/**
 * A turn running here under its control (turn-core.ts): stop() hands it back to the queue
 * unfinalised; a lost job lock (lockRenewalFailed) means another worker owns it now.
 */
export interface ActiveTurn {
  runIds: string[];
  jobId: string;
  control: TurnControl;
}

interface Entry {
  runId: string;
  env: Envelope | null;
  flag: string;
}

interface Taken {
  kind: "new" | "resume";
  attempt: number;
  /** Other gateways with /ws clients when the turn was taken (-1: not asked). */
  audience: number;
  entries: Entry[];
  peek: Array<{ runId: string; env: Envelope | null }>;
}

const EARLY_TTL_MS = 60_000;

export class TurnProcessor {
  readonly byRun = new Map<string, ActiveTurn>();
  readonly byJob = new Map<string, ActiveTurn>();
  /** Cancels/steering that arrived (over the bus) before their turn registered here. */
  private readonly early = new Map<string, { at: number; reason?: TurnAbort; steering: string[] }>();
  readonly stats: TurnStats = { turns: 0, resumed: 0, fenced: 0, handedBack: 0, direct: 0 };

  constructor(private readonly ctx: DriverContext) {}

  async process(job: Job, token: string): Promise<void> {
    const data = drainDataSchema.safeParse(job.data);
    if (!data.success || !job.id) throw new UnrecoverableError("drain job without a session key");
    await this.drain(data.data.s, jobHold(job, token));
  }

  /** Takes the session's next turn (or the one left in flight), runs it and commits it. */
  async drain(sessionKey: string, hold: DrainHold): Promise<void> {
    const taken = await this.take(sessionKey, hold);
    if (!taken) return;
    hold.taken();
    if (hold.lockMs > 0) this.stats.direct++;
    if (taken.kind === "new" && taken.peek.length > 0) await this.collect(sessionKey, hold.id, taken);
    if (taken.kind === "resume") this.stats.resumed++;
    // Nobody could watch this turn live: its deltas, typing and transcript events stay in this process.
    const unquiet = taken.audience === 0 ? this.ctx.live?.quiet(sessionKey) : undefined;
    let left: number;
    try {
      left = await this.runTaken(hold, sessionKey, taken);
    } finally {
      unquiet?.();
    }
    if (left > 0) await hold.next();
  }

  // ---------------------------------------------------------------------------------------------
  // take

  private async take(sessionKey: string, hold: DrainHold): Promise<Taken | null> {
    const { keys, scripts, tuning, live } = this.ctx;
    const window = tuning.mode === "collect" ? tuning.collectMax - 1 : 0;
    const reply = (await scripts.run(
      takeTurn,
      [keys.active(sessionKey), keys.mailbox(sessionKey), keys.scheduled(sessionKey), keys.liveAudience],
      [
        hold.id,
        keys.runPrefix,
        keys.cancelPrefix,
        keys.jobPrefix,
        window,
        live?.member ?? "",
        hold.token,
        hold.lockMs,
      ],
    )) as unknown[];
    const kind = String(reply[0]);
    if (kind !== "new" && kind !== "resume") return null;
    const attempt = Number(reply[1]);
    const audience = Number(reply[2]);
    const n = Number(reply[3]);
    const entries: Entry[] = [];
    let i = 4;
    for (let k = 0; k < n; k++, i += 3) {
      const runId = String(reply[i]);
      entries.push({ runId, env: this.envelope(runId, reply[i + 1]), flag: String(reply[i + 2] ?? "") });
    }
    const peek: Taken["peek"] = [];
    for (; i + 1 < reply.length; i += 2) {
      const runId = String(reply[i]);
      peek.push({ runId, env: this.envelope(runId, reply[i + 1]) });
    }
    return { kind, attempt, audience, entries, peek };
  }

  private envelope(runId: string, raw: unknown): Envelope | null {
    const env = typeof raw === "string" && raw !== "" ? parseStored(envelopeSchema, raw) : null;
    if (!env)
      this.ctx.logger.error({ runId }, "bullmq pipeline: turn request unreadable; the run ends as error");
    return env;
  }

  /** Collect mode: fold the following messages that may join the head into this turn (FIFO kept). */
  private async collect(sessionKey: string, jobId: string, taken: Taken): Promise<void> {
    const head = taken.entries[0]?.env;
    if (!head) return;
    const join: Array<{ runId: string; env: Envelope }> = [];
    for (const p of taken.peek) {
      if (!p.env || !canCollect(head.req, p.env.req)) break;
      join.push({ runId: p.runId, env: p.env });
    }
    if (join.length === 0) return;
    const { keys, scripts } = this.ctx;
    const n = Number(
      await scripts.run(
        extendTurn,
        [keys.active(sessionKey), keys.mailbox(sessionKey)],
        [jobId, keys.runPrefix, ...join.map((j) => j.runId)],
      ),
    );
    for (const j of join.slice(0, n)) taken.entries.push({ runId: j.runId, env: j.env, flag: "" });
  }

  // ---------------------------------------------------------------------------------------------
  // run

  /** Returns the mailbox length after the turn (> 0: re-enqueue), or ≤ 0 when there is nothing to do. */
  private async runTaken(hold: DrainHold, sessionKey: string, taken: Taken): Promise<number> {
    const { entries, attempt } = taken;
    const flag = entries.find((e) => e.flag === "aborted" || e.flag === "timeout")?.flag as
      | TurnAbort
      | undefined;
    if (taken.kind === "resume") {
      // Committed with its follow-ups before the worker died: finish that commit, never re-run.
      const raw = await this.ctx.redis.hget(this.ctx.keys.active(sessionKey), "final");
      const committed = raw ? parseStored(committedSchema, raw) : null;
      if (committed) return this.commit(hold, sessionKey, entries, committed.result, undefined, committed);
      if (raw)
        this.ctx.logger.error({ sessionKey }, "bullmq pipeline: committed outcome unreadable; re-running");
    }
    if (attempt > this.ctx.tuning.maxTurnAttempts) {
      const error = `turn abandoned after ${attempt - 1} attempts (its worker stopped each time)`;
      this.ctx.logger.error({ runIds: entries.map((e) => e.runId), sessionKey }, `bullmq pipeline: ${error}`);
      return this.commit(hold, sessionKey, entries, { status: "error", error });
    }
    if (flag) return this.commit(hold, sessionKey, entries, { status: flag });
    if (taken.kind === "resume") {
      const recs = await Promise.all(entries.map((e) => this.ctx.runs.get(e.runId)));
      if (recs.every((r) => r && FINAL_RUN_STATUSES.has(r.status))) {
        // The outcome reached the RunStore but the ack was lost: do not run the turn again.
        return this.commit(hold, sessionKey, entries, null, recs as RunRecord[]);
      }
    }
    const runnable = entries.filter((e): e is Entry & { env: Envelope } => e.env !== null);
    if (runnable.length === 0) {
      return this.commit(hold, sessionKey, entries, {
        status: "error",
        error: "turn request unreadable",
      });
    }
    const job = turnJobOf(
      runnable.map((e) => ({ runId: e.runId, req: e.env.req })),
      attempt,
    );
    // the handler's first reads go out beside the write that marks the runs running
    try {
      this.ctx.handlers()?.prepareTurn?.(job);
    } catch (err) {
      this.ctx.logger.warn({ err: errorMessage(err), sessionKey }, "bullmq pipeline: prepareTurn threw");
    }
    const startedAt = this.ctx.now();
    const started = await Promise.all(runnable.map((e) => this.markRunning(e.runId, e.env, startedAt)));
    // run.started is told to this process only; other processes learn of runs when they finish.
    for (const run of started) this.ctx.emit({ type: "run.started", run });

    const control = new TurnControl();
    const active: ActiveTurn = { runIds: entries.map((e) => e.runId), jobId: hold.id, control };
    this.register(active);
    this.stats.turns++;
    try {
      const result = await control.run(
        this.ctx.handlers(),
        job,
        async () =>
          !control.shutdown &&
          !control.lostLock &&
          (await this.ctx.redis.get(this.ctx.keys.lock(active.jobId))) === hold.token,
      );
      if (control.shutdown) {
        // Not finalised: back to the queue at once; the next worker resumes it with attempt + 1.
        this.stats.handedBack++;
        await hold.handBack();
        return -1;
      }
      if (control.lostLock) {
        this.stats.fenced++;
        this.ctx.logger.warn(
          { runIds: active.runIds, jobId: active.jobId },
          "bullmq pipeline: final write refused: the job lock was lost and another worker owns the turn",
        );
        return -1;
      }
      const unreadable = entries.filter((e) => e.env === null);
      return await this.commit(hold, sessionKey, [...runnable, ...unreadable], result);
    } finally {
      this.unregister(active);
    }
  }

  private async markRunning(runId: string, env: Envelope, startedAt: number): Promise<RunRecord> {
    // The queued record is rebuilt from the accepted request exactly as the accepting process
    // wrote it: a store that does not know the record may write against it without reading.
    const queued = queuedRecord(runId, env.req, env.createdAt);
    const rec = await this.ctx.runs.patch(runId, { status: "running", startedAt }, queued);
    if (rec) return rec;
    // The record is missing (store lost it): recreate it from the accepted request.
    const full: RunRecord = { ...queued, status: "running", startedAt };
    await this.ctx.runs.put(full);
    return full;
  }

  // ---------------------------------------------------------------------------------------------
  // commit

  /**
   * Fenced final write + ack. `result` null means the records are already final (`finals`); a
   * cancel flag found at the fence forces the status (a cancel whose broadcast was missed).
   * `committed`: the outcome and outbox entries a previous owner already committed (`act.final`).
   * Returns the mailbox length left, or -1 when the write was refused.
   */
  private async commit(
    hold: DrainHold,
    sessionKey: string,
    entries: Entry[],
    result: TurnResult | null,
    finals?: RunRecord[],
    committed?: { result: FinalResult; outbox: string[] },
  ): Promise<number> {
    const { keys, scripts, logger, tuning, instanceId } = this.ctx;
    const runIds = entries.map((e) => e.runId);
    const { id: jobId, token } = hold;
    const [owner, flag] = (await scripts.run(
      checkOwner,
      [keys.lock(jobId)],
      [token, keys.cancelPrefix, ...runIds],
    )) as [unknown, unknown];
    if (Number(owner) !== 1) {
      return this.refused(runIds, jobId);
    }
    let records = finals;
    let outbox = committed?.outbox ?? [];
    if (!records) {
      let res: FinalResult = committed?.result ?? finalResultOf(result ?? { status: "error" });
      if (!committed && (flag === "aborted" || flag === "timeout") && res.status !== flag)
        res = { ...res, status: flag };
      const followUps = committed ? [] : (result?.followUps ?? []);
      if (followUps.length > 0) {
        // The transactional outbox: outcome and follow-ups in one fenced script.
        outbox = followUps.map((f) =>
          JSON.stringify({ from: runIds[0] ?? "", followUp: f } satisfies OutboxEntry),
        );
        const ok = Number(
          await scripts.run(
            commitTurn,
            [keys.lock(jobId), keys.active(sessionKey), keys.outbox],
            [token, JSON.stringify({ result: res, outbox }), ...outbox],
          ),
        );
        if (ok !== 1) return this.refused(runIds, jobId);
      }
      records = await this.writeFinals(sessionKey, entries, res);
    }
    const acked = scripts.run(
      ackTurn,
      [
        keys.lock(jobId),
        keys.active(sessionKey),
        keys.mailbox(sessionKey),
        keys.runEvents,
        keys.scheduled(sessionKey),
      ],
      [
        token,
        keys.runPrefix,
        tuning.runRetentionMs,
        eventMessage(instanceId, "run.finished", records),
        keys.cancelPrefix,
        hold.lockMs > 0 ? "1" : "",
        ...runIds,
      ],
    );
    // The records are final in the RunStore: this process's listeners and waiters have them now,
    // not a round trip later (an ack that is lost or refused is done again by the next drain,
    // which finds the records final, only acks, and tells run.finished once more).
    for (const run of records) {
      this.ctx.emit({ type: "run.finished", run });
      this.ctx.settle(run);
    }
    const left = Number(await acked);
    if (left < 0) {
      this.stats.fenced++;
      logger.warn(
        { runIds, jobId },
        "bullmq pipeline: lost the job lock while committing; the new owner re-checks",
      );
    }
    // Committed follow-ups are in the outbox whatever happens next; relay them now.
    if (outbox.length > 0) await relayQuietly(this.ctx, outbox);
    return left;
  }

  /** The fence refused the final write: counted and logged; commit returns -1. */
  private refused(runIds: string[], jobId: string): -1 {
    this.stats.fenced++;
    this.ctx.logger.warn(
      { runIds, jobId },
      "bullmq pipeline: final write refused: this worker no longer owns the turn",
    );
    return -1;
  }

  /** Each run's final record (an unreadable request ends as an error); a missing record is written whole. */
  private async writeFinals(sessionKey: string, entries: Entry[], res: FinalResult): Promise<RunRecord[]> {
    const { runs, now } = this.ctx;
    const patch: Partial<RunRecord> = { ...res, endedAt: now() };
    return Promise.all(
      entries.map(async (e) => {
        const own: Partial<RunRecord> =
          e.env === null
            ? { status: "error", error: "turn request unreadable", endedAt: patch.endedAt }
            : patch;
        const rec = await runs.patch(e.runId, own);
        if (rec) return rec;
        const base: RunRecord = e.env
          ? queuedRecord(e.runId, e.env.req, e.env.createdAt)
          : { runId: e.runId, sessionKey, agentId: "unknown", status: "queued", createdAt: now() };
        const full: RunRecord = { ...base, ...own };
        await runs.put(full);
        return full;
      }),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // control (cancel, steer, shutdown, lost locks)

  private register(active: ActiveTurn): void {
    this.byJob.set(active.jobId, active);
    for (const id of active.runIds) {
      this.byRun.set(id, active);
      const early = this.early.get(id);
      if (!early) continue;
      this.early.delete(id);
      active.control.steering.push(...early.steering);
      if (early.reason) active.control.cancel(early.reason);
    }
  }

  private unregister(active: ActiveTurn): void {
    if (this.byJob.get(active.jobId) === active) this.byJob.delete(active.jobId);
    for (const id of active.runIds) if (this.byRun.get(id) === active) this.byRun.delete(id);
  }

  /** Aborts a turn running here. `remember`: keep it for a turn that has not registered yet. */
  cancelLocal(runId: string, reason: TurnAbort, remember = false): boolean {
    const active = this.byRun.get(runId);
    if (active) return active.control.cancel(reason);
    if (remember) this.remember(runId).reason = reason;
    return false;
  }

  steerLocal(runId: string, text: string, remember = false): boolean {
    const active = this.byRun.get(runId);
    if (active) return active.control.steer(text);
    if (remember) this.remember(runId).steering.push(text);
    return false;
  }

  private remember(runId: string): { at: number; reason?: TurnAbort; steering: string[] } {
    const now = Date.now();
    for (const [id, e] of this.early) {
      if (now - e.at <= EARLY_TTL_MS) break;
      this.early.delete(id);
    }
    let e = this.early.get(runId);
    if (!e) {
      e = { at: now, steering: [] };
      this.early.set(runId, e);
    }
    return e;
  }

  /** Running here (not yet returned from the handler). */
  isRunningHere(runId: string): boolean {
    const a = this.byRun.get(runId);
    return a !== undefined && !a.control.done;
  }

  knowsRun(runId: string): boolean {
    return this.byRun.has(runId);
  }

  shutdownAll(): void {
    for (const active of this.byJob.values()) active.control.stop();
  }

  lockLost(jobId: string): void {
    this.byJob.get(jobId)?.control.lose();
  }
}
