import { randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { MAX_TIMER_MS } from "../../deadlines.js";
import { errorMessage, formatIssues, InvalidParamsError, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { closeQueue } from "../../redis/close.js";
import { cancelRun, submitTurn } from "../../redis/commands/pipeline.js";
import { ScriptRunner } from "../../redis/scripts.js";
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
import { BackgroundProcessor, backgroundJobOptions } from "./background.js";
import { Bus, Waiters } from "./bus.js";
import { type DriverContext, eventMessage, eventPrefix, type LiveAudience } from "./context.js";
import { backgroundJobId, PipelineKeys, QUEUE_NAME } from "./keys.js";
import { type BullmqTuning, type BullmqTuningInput, type BusMessage, bullmqOptionsSchema } from "./schema.js";
import { TurnProcessor, type TurnStats } from "./turns.js";
import { addDrain, WorkerHost } from "./worker.js";

/**
 * The BullMQ pipeline driver: the same observable semantics as `local/` (both run
 * `test/contract/pipeline.ts`), for several gateway/worker processes sharing one Redis.
 *
 * Per-session order without BullMQ Pro groups: each session has a mailbox list in Redis and at most
 * one "drain" job (deduplication id = session, `keepLastIfActive`), which runs ONE turn and
 * re-enqueues itself at the tail while the mailbox is not empty, so busy sessions interleave
 * round-robin; producers add a drain job only when none is scheduled (`{tag}:sched:<session>`). A
 * sweeper (BullMQ Job Scheduler) re-drives mailboxes left without a drain job (e.g. a producer that
 * died between its mailbox push and its add, or a drain job that failed for good). Turns are at-least-once: a turn whose worker died is
 * re-run by another worker with `attempt` > 1 once its lock expired and a stalled check ran
 * (≈ lockDurationMs + stalledIntervalMs). See turns.ts for the fenced commit, keys.ts for the keys.
 *
 * Connections: `connection` is shared (queue commands, scripts, publishes) and never closed here.
 * Every connection made with `createBlockingConnection` (the worker's, the bus subscriber) is owned
 * by the pipeline and closed by `stop()`; they need `maxRetriesPerRequest: null`, and no ioredis
 * `keyPrefix` may be set on any of them (use `prefix`).
 */

export interface BullmqPipelineOptions extends Omit<BullmqTuningInput, "prefix"> {
  /** Shared ioredis client for commands (the composition root creates and closes it). */
  connection: Redis;
  /** Makes a NEW ioredis client with `maxRetriesPerRequest: null` (worker, pub/sub subscriber). */
  createBlockingConnection: () => Redis;
  /** Key prefix (`queue.prefix`); every key lives under the hash tag `{prefix}`. */
  prefix: string;
  runs: RunStore;
  logger: Logger;
  now?: () => number;
  /** The live event relay: a turn no gateway's /ws client can watch publishes no live events. */
  live?: LiveAudience;
}

export interface BullmqPipeline extends Pipeline {
  readonly driver: "bullmq";
  /** SCAN pattern of every key this pipeline writes (tests, doctor). */
  keyPattern(): string;
  /** Counters of this process (health/metrics and tests). */
  stats(): TurnStats;
}

export function createBullmqPipeline(opts: BullmqPipelineOptions): BullmqPipeline {
  const { connection, createBlockingConnection, runs, logger, now, live, ...rest } = opts;
  const parsed = bullmqOptionsSchema.safeParse(rest);
  if (!parsed.success) throw new InvalidParamsError(formatIssues(parsed.error.issues, "queue."));
  if (connection.options.keyPrefix) {
    throw new InvalidParamsError("queue.connection: ioredis keyPrefix is not supported; use queue.prefix");
  }
  return new BullmqPipelineImpl(
    connection,
    createBlockingConnection,
    runs,
    logger,
    now ?? Date.now,
    parsed.data,
    live ?? null,
  );
}

type State = "idle" | "started" | "stopping" | "stopped";

class BullmqPipelineImpl implements BullmqPipeline {
  readonly driver = "bullmq" as const;
  private state: State = "idle";
  private handlers: JobHandlers | null = null;
  private readonly keys: PipelineKeys;
  private readonly queue: Queue;
  private readonly ctx: DriverContext;
  private readonly turns: TurnProcessor;
  private readonly bg: BackgroundProcessor;
  private readonly bus: Bus;
  private readonly waiters = new Waiters();
  private readonly listeners = new Set<(event: RunEvent) => void>();
  private readonly instanceId = randomUUID();
  private host: WorkerHost | null = null;
  private stopping: Promise<void> | null = null;
  /** Submissions not yet durable, so duplicates, waits and cancels can join them. */
  private readonly scripts: ScriptRunner;
  private readonly submitting = new Map<string, Promise<RunRecord>>();
  private readonly jobSubmitting = new Map<string, Promise<void>>();
  /** Per session: the tail of this process's mailbox pushes, so pushes keep call order. */
  private readonly tails = new Map<string, Promise<void>>();

  constructor(
    private readonly redis: Redis,
    private readonly createBlocking: () => Redis,
    private readonly runs: RunStore,
    private readonly logger: Logger,
    private readonly now: () => number,
    private readonly tuning: BullmqTuning,
    live: LiveAudience | null,
  ) {
    this.keys = new PipelineKeys(tuning.prefix);
    this.queue = new Queue(QUEUE_NAME, { connection: redis, prefix: this.keys.tag });
    this.queue.on("error", (err) =>
      this.logger.warn({ err: errorMessage(err) }, "bullmq pipeline: queue error"),
    );
    this.scripts = new ScriptRunner(redis, "bullmq pipeline");
    this.ctx = {
      keys: this.keys,
      redis,
      scripts: this.scripts,
      queue: this.queue,
      runs,
      logger,
      now,
      tuning,
      instanceId: this.instanceId,
      live,
      handlers: () => this.handlers,
      emit: (event) => this.emit(event),
      settle: (run) => this.waiters.settle(run),
      stopping: () => this.state === "stopping" || this.state === "stopped",
      submitFollowUp: async (f) => {
        if (f.type === "job") await this.submit(f.job, f.delayMs ? { delayMs: f.delayMs } : undefined);
        else await this.submitTurn(f.turn);
      },
    };
    this.turns = new TurnProcessor(this.ctx);
    this.bg = new BackgroundProcessor(this.ctx);
    this.bus = new Bus(
      createBlocking,
      { control: this.keys.bus, runs: this.keys.runEvents },
      logger,
      (msg) => this.onBusMessage(msg),
      () => this.recheckWaiters(),
      eventPrefix(this.instanceId),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // lifecycle

  async start(handlers: JobHandlers): Promise<void> {
    if (this.state === "started" || this.handlers) {
      this.logger.warn("bullmq pipeline: start() called twice; ignored");
      return;
    }
    this.assertOpen();
    this.handlers = handlers;
    try {
      // cancel and steer always; run events when someone here listens (a gateway's clients)
      await (this.listeners.size > 0 ? this.bus.ensureRuns() : this.bus.ensure());
      if (this.tuning.processJobs) {
        this.host = new WorkerHost(this.ctx, this.createBlocking, this.turns, this.bg);
        await this.host.start();
      }
    } catch (err) {
      // Leave the instance startable again (e.g. Redis was not reachable yet).
      const host = this.host;
      this.host = null;
      this.handlers = null;
      await host?.stop(0);
      throw err;
    }
    this.assertOpen();
    this.state = "started";
  }

  stop(graceMs = 5000): Promise<void> {
    this.stopping ??= this.shutdown(graceMs);
    return this.stopping;
  }

  private async shutdown(graceMs: number): Promise<void> {
    this.state = "stopping";
    await this.host?.stop(graceMs);
    await this.bus.close();
    await closeQueue(this.queue, this.logger);
    this.state = "stopped";
  }

  private assertOpen(): void {
    if (this.state === "stopping" || this.state === "stopped") {
      throw new SwitchboardError("UNAVAILABLE", "bullmq pipeline is stopped; create a new one to restart");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // turns: accept

  submitTurn(input: TurnRequest): Promise<RunRecord> {
    let req: TurnRequest;
    try {
      req = parseInput(turnRequestSchema, input, "turn");
      this.assertOpen();
    } catch (err) {
      return Promise.reject(err);
    }
    const runId = req.runId ?? randomUUID();
    return singleFlight(this.submitting, runId, () => this.acceptTurn(runId, req));
  }

  /**
   * Durable before it resolves: the `queued` record is in the RunStore, then one script stores the
   * request and pushes it into the mailbox (so a worker never takes a run without its record), then
   * the drain job is added unless one is already scheduled. When the RunStore writes on this
   * connection (`runsShareConnection`) the record's write and the push go out together: Redis runs
   * them in that order; a push that succeeded after a record write that failed still counts (the
   * turn is in the mailbox: the worker writes the record whole when it marks the run running).
   * Pushes of one session keep this process's call order. A producer that dies between the push
   * and the add leaves the mailbox to the sweeper.
   * Known limits: two processes submitting the same explicit runId at the same instant may both
   * write the `queued` record (only one is queued and run); a submit that fails after the record
   * was written leaves a `queued` record behind (a retry with the same runId completes it).
   */
  private async acceptTurn(runId: string, req: TurnRequest): Promise<RunRecord> {
    if (req.runId !== undefined) {
      // A known runId is a duplicate — unless its record is all an earlier, failed submit left
      // (queued, but never pushed: no pipeline state): then this submit is the one that counts.
      const existing = await this.runs.get(runId);
      if (existing && FINAL_RUN_STATUSES.has(existing.status)) return existing;
      if (existing && (await this.redis.exists(this.keys.run(runId))) === 1) return existing;
    }
    const createdAt = this.now();
    const rec = queuedRecord(runId, req, createdAt);
    const put = this.runs.put(rec);
    put.catch(() => undefined); // awaited below, in session order
    let direct = null as Promise<boolean> | null;
    const together = this.tuning.runsShareConnection;
    const accepted = await this.inSessionOrder(req.sessionKey, async () => {
      if (!together) await put;
      const envelope = JSON.stringify({ req, createdAt });
      const { keys } = this;
      // Before the push: from here on, the run's finish reaches this process's waiters.
      const generation = this.bus.listening();
      if (generation !== null) this.waiters.expect(runId, generation);
      try {
        const submitted = this.scripts.run(
          submitTurn,
          [keys.run(runId), keys.mailbox(req.sessionKey), keys.dirty, keys.scheduled(req.sessionKey)],
          [runId, req.sessionKey, envelope],
        );
        // Right behind the submit on the connection (one round trip for both): with a free slot
        // this process takes the session's next turn itself (direct.ts).
        direct = this.host?.runDirect(req.sessionKey) ?? null;
        const n = Number(await submitted);
        if (together)
          await put.catch((err: unknown) => {
            if (n === 0) return; // a duplicate: its record is read below
            this.logger.warn(
              { err: errorMessage(err), runId },
              "bullmq pipeline: the queued record was not written; the turn is accepted and its record is written when it starts",
            );
          });
        return n;
      } catch (err) {
        this.waiters.forget(runId);
        throw err;
      }
    });
    if (accepted === 0) {
      this.waiters.forget(runId);
      return (await this.runs.get(runId)) ?? rec;
    }
    // 2: a drain job is already scheduled for this session and will see the message. 1: nobody
    // drains the session: unless this process took the turn itself, a drain job is added.
    if (accepted === 1 && !(await direct)) await addDrain(this.queue, req.sessionKey);
    return { ...rec };
  }

  private inSessionOrder<T>(sessionKey: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(sessionKey) ?? Promise.resolve();
    const next = prev.then(fn);
    const tail = next.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(sessionKey, tail);
    void tail.then(() => {
      if (this.tails.get(sessionKey) === tail) this.tails.delete(sessionKey);
    });
    return next;
  }

  // ---------------------------------------------------------------------------------------------
  // turns: control

  async wait(runId: string, timeoutMs: number): Promise<RunRecord | null> {
    const pending = this.submitting.get(runId);
    if (pending) await pending.catch(() => null);
    const live = timeoutMs > 0 && this.state !== "stopping" && this.state !== "stopped";
    const deadline = Date.now() + timeoutMs;
    // Subscribe before reading the record, so a finish in between is not missed. Without a bus
    // (Redis unreachable) the wait still ends at its deadline with the record as it then is.
    if (live) await this.subscribedWithin(timeoutMs);
    // A run this process pushed while listening, with no finish heard since, is unfinished: the
    // read would only say queued or running (one round trip of every chat.send saved).
    const unfinished = this.waiters.takeUnfinished(runId, live ? this.bus.listening() : null);
    return new Promise<RunRecord | null>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (rec: RunRecord | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        remove();
        resolve(rec);
      };
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        remove();
        reject(err);
      };
      const remove = this.waiters.add(runId, finish);
      if (live) {
        const left = Math.max(0, deadline - Date.now());
        timer = setTimeout(() => this.runs.get(runId).then(finish, fail), Math.min(left, MAX_TIMER_MS));
      }
      if (unfinished) return;
      this.runs.get(runId).then((rec) => {
        if (!rec || !live || FINAL_RUN_STATUSES.has(rec.status)) finish(rec);
      }, fail);
    });
  }

  private async subscribedWithin(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const subscribed = this.bus.ensureRuns().catch((err: unknown) => {
      this.logger.warn(
        { err: errorMessage(err) },
        "bullmq pipeline: cannot subscribe; wait reads at its deadline",
      );
    });
    await Promise.race([
      subscribed,
      new Promise<void>((r) => {
        timer = setTimeout(r, Math.min(ms, MAX_TIMER_MS));
      }),
    ]);
    clearTimeout(timer);
  }

  async cancel(runId: string, reason: "aborted" | "timeout"): Promise<boolean> {
    const pending = this.submitting.get(runId);
    if (pending) await pending.catch(() => null);
    const sessionKey = await this.redis.hget(this.keys.run(runId), "s");
    if (!sessionKey) return false;
    const res = String(
      await this.scripts.run(
        cancelRun,
        [this.keys.run(runId), this.keys.mailbox(sessionKey), this.keys.cancel(runId)],
        [runId, reason, this.tuning.cancelFlagTtlMs, this.tuning.runRetentionMs],
      ),
    );
    if (res === "removed") {
      const rec = await this.runs.patch(runId, { status: reason, endedAt: this.now() });
      if (rec) {
        await this.redis.publish(this.keys.runEvents, eventMessage(this.instanceId, "run.finished", [rec]));
        this.emit({ type: "run.finished", run: rec });
        this.waiters.settle(rec);
      }
      return true;
    }
    if (res !== "active") return false;
    // Taken into a turn. If its outcome is already written, it is final: nothing to cancel.
    const rec = await this.runs.get(runId);
    if (rec && FINAL_RUN_STATUSES.has(rec.status)) return false;
    if (!this.turns.cancelLocal(runId, reason)) {
      const msg: BusMessage = { t: "cancel", from: this.instanceId, runId, reason };
      await this.redis.publish(this.keys.bus, JSON.stringify(msg));
    }
    return true;
  }

  async steer(runId: string, text: string): Promise<boolean> {
    if (typeof text !== "string" || text.length === 0) throw new InvalidParamsError("text: required");
    if (this.turns.steerLocal(runId, text)) return true;
    if (this.turns.knowsRun(runId)) return false; // ran here and already returned
    if ((await this.redis.hget(this.keys.run(runId), "st")) !== "a") return false;
    const rec = await this.runs.get(runId);
    if (!rec || FINAL_RUN_STATUSES.has(rec.status)) return false;
    const msg: BusMessage = { t: "steer", from: this.instanceId, runId, text };
    await this.redis.publish(this.keys.bus, JSON.stringify(msg));
    return true;
  }

  async depth(): Promise<number> {
    // jobs ready for a worker (delayed ones, like the sweeper's next run, are not waiting yet)
    const c = await this.queue.getJobCounts("wait", "prioritized");
    return (c.wait ?? 0) + (c.prioritized ?? 0);
  }

  async queueInfo(sessionKey: string): Promise<SessionQueueInfo> {
    const res = await this.redis
      .multi()
      .llen(this.keys.mailbox(sessionKey))
      .hget(this.keys.active(sessionKey), "ids")
      .exec();
    const pending = Number(res?.[0]?.[1] ?? 0);
    const ids = res?.[1]?.[1];
    const first = typeof ids === "string" ? (JSON.parse(ids) as unknown[])[0] : undefined;
    return typeof first === "string" ? { pending, activeRunId: first } : { pending };
  }

  onRunEvent(listener: (event: RunEvent) => void): () => void {
    this.listeners.add(listener);
    if (this.state !== "stopping" && this.state !== "stopped") {
      this.bus.ensureRuns().catch((err: unknown) => {
        this.logger.warn({ err: errorMessage(err) }, "bullmq pipeline: cannot subscribe to run events");
      });
    }
    return () => this.listeners.delete(listener);
  }

  private emit(event: RunEvent): void {
    for (const l of this.listeners) {
      try {
        l(event);
      } catch (err) {
        this.logger.warn({ err: errorMessage(err), type: event.type }, "bullmq pipeline: run listener threw");
      }
    }
  }

  private onBusMessage(msg: BusMessage): void {
    if (msg.from === this.instanceId) return;
    switch (msg.t) {
      case "ev":
        for (const run of msg.runs) {
          this.emit({ type: msg.type, run });
          if (msg.type === "run.finished") this.waiters.settle(run);
        }
        return;
      case "cancel":
        this.turns.cancelLocal(msg.runId, msg.reason, true);
        return;
      case "steer":
        this.turns.steerLocal(msg.runId, msg.text, true);
        return;
    }
  }

  /** After a bus reconnect: notifications may have been missed, so read the awaited records again. */
  private recheckWaiters(): void {
    for (const runId of this.waiters.runIds()) {
      this.runs.get(runId).then(
        (rec) => {
          if (rec) this.waiters.settle(rec);
        },
        () => undefined,
      );
    }
  }

  // ---------------------------------------------------------------------------------------------
  // background jobs

  submit(input: BackgroundJob, opts?: { delayMs?: number }): Promise<void> {
    let job: BackgroundJob;
    const delayMs = opts?.delayMs ?? 0;
    try {
      job = parseInput(backgroundJobSchema, input, "job");
      if (!Number.isFinite(delayMs) || delayMs < 0) throw new InvalidParamsError("delayMs: must be ≥ 0");
      this.assertOpen();
    } catch (err) {
      return Promise.reject(err);
    }
    const joining = this.jobSubmitting.get(job.id);
    if (joining) return joining;
    const jobId = backgroundJobId(job.id);
    const p = this.queue
      .add("bg", job, backgroundJobOptions(this.ctx, jobId, Math.round(delayMs)))
      .then(() => undefined);
    this.jobSubmitting.set(job.id, p);
    const done = () => this.jobSubmitting.delete(job.id);
    p.then(done, done);
    return p;
  }

  // ---------------------------------------------------------------------------------------------
  // introspection

  keyPattern(): string {
    return this.keys.pattern();
  }

  stats(): TurnStats {
    return { ...this.turns.stats };
  }
}
