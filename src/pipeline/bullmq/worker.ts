import { type Job, type Queue, UnrecoverableError, WaitingError, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { errorMessage } from "../../errors.js";
import { closeClient, closeWorker } from "../../redis/close.js";
import { sweepSession } from "../../redis/commands/pipeline.js";
import { settleWithin } from "../../retry/index.js";
import type { BackgroundProcessor } from "./background.js";
import type { DriverContext } from "./context.js";
import { DirectTurns, Slots } from "./direct.js";
import { drainDedupId, QUEUE_NAME } from "./keys.js";
import { relayQuietly } from "./outbox.js";
import type { TurnProcessor } from "./turns.js";

/**
 * The BullMQ worker of one pipeline instance (absent in an enqueue-only process), the drain-job
 * options, and the sweeper that re-drives mailboxes left without a drain job.
 *
 * One queue carries every job: `drain` (a session's turns), `bg` (background jobs) and `sweep`
 * (the Job Scheduler's tick), so `concurrency` caps them together, as in the local driver — with
 * the turns this process runs directly (direct.ts): both take one of the same `Slots`.
 */

/** Makes sure a drain job exists for the session (deduplicated; stored as "next" while one is active). */
export async function addDrain(queue: Queue, sessionKey: string): Promise<void> {
  await queue.add(
    "drain",
    { s: sessionKey },
    {
      deduplication: { id: drainDedupId(sessionKey), keepLastIfActive: true },
      // A drain job only throws on infrastructure errors (Redis, RunStore): retry it soon.
      attempts: 5,
      backoff: { type: "exponential", delay: 500 },
      // Nobody reads a finished drain job; failed ones are kept a day for inspection.
      removeOnComplete: true,
      removeOnFail: { age: 24 * 3600, count: 1000 },
    },
  );
}

/**
 * Adds a drain job for every dirty session that has queued or in-flight work (forgets idle ones),
 * and relays follow-ups left in the outbox by a worker that died after its commit.
 */
export async function sweepDirty(ctx: DriverContext): Promise<void> {
  await relayQuietly(ctx);
  const { keys, redis, scripts } = ctx;
  let cursor = "0";
  do {
    const [next, sessions] = await redis.sscan(keys.dirty, cursor, "COUNT", 500);
    cursor = next;
    await Promise.all(
      sessions.map(async (s) => {
        const need = await scripts.run(sweepSession, [keys.mailbox(s), keys.active(s), keys.dirty], [s]);
        if (Number(need) === 1) await addDrain(ctx.queue, s);
      }),
    );
  } while (cursor !== "0");
}

export class WorkerHost {
  private worker: Worker | null = null;
  private connection: Redis | null = null;
  /** Every job and direct turn this process runs, so stop() can wait for them. */
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly slots: Slots;
  private readonly direct: DirectTurns | null;

  constructor(
    private readonly ctx: DriverContext,
    private readonly createConnection: () => Redis,
    private readonly turns: TurnProcessor,
    private readonly bg: BackgroundProcessor,
  ) {
    this.slots = new Slots(ctx.tuning.concurrency);
    this.direct = ctx.tuning.directTurns
      ? new DirectTurns(
          ctx,
          turns,
          this.slots,
          (sessionKey) => addDrain(ctx.queue, sessionKey),
          (run) => this.track(run),
        )
      : null;
  }

  /** Takes the session's next turn in this process now, if a slot is free (see direct.ts `tryRun`). */
  runDirect(sessionKey: string): Promise<boolean> | null {
    return this.worker === null ? null : (this.direct?.tryRun(sessionKey) ?? null);
  }

  async start(): Promise<void> {
    const { ctx } = this;
    const { tuning, logger } = ctx;
    const connection = this.createConnection();
    this.connection = connection;
    const worker = new Worker(QUEUE_NAME, (job: Job, token?: string) => this.process(job, token ?? ""), {
      connection,
      prefix: ctx.keys.tag,
      concurrency: tuning.concurrency,
      lockDuration: tuning.lockDurationMs,
      stalledInterval: tuning.stalledIntervalMs,
      maxStalledCount: tuning.maxTurnAttempts,
      runRetryDelay: tuning.reconnectRetryMs,
      autorun: false,
    });
    this.worker = worker;
    worker.on("error", (err) => logger.warn({ err: errorMessage(err) }, "bullmq pipeline: worker error"));
    worker.on("failed", (job, err) => {
      if (job?.name === "bg") return; // logged by the background processor
      logger.error(
        { jobId: job?.id, name: job?.name, err: errorMessage(err) },
        "bullmq pipeline: job failed",
      );
    });
    // BullMQ does not stop a processor whose lock renewal failed; another worker may own the job
    // already, so abort it here (its commit is fenced anyway).
    worker.on("lockRenewalFailed", (jobIds: string[]) => {
      for (const id of jobIds) {
        logger.warn({ jobId: id }, "bullmq pipeline: job lock lost; aborting it here");
        this.turns.lockLost(id);
        this.bg.lockLost(id);
      }
    });
    await ctx.queue.upsertJobScheduler(
      "sweep",
      { every: tuning.sweepIntervalMs ?? tuning.stalledIntervalMs },
      { name: "sweep", data: {}, opts: { removeOnComplete: true, removeOnFail: { count: 100 } } },
    );
    worker
      .run()
      .catch((err: unknown) => logger.error({ err: errorMessage(err) }, "bullmq pipeline: worker stopped"));
    await worker.waitUntilReady();
    // Follow-ups a dead worker committed but did not relay: do not wait for the first sweep.
    await relayQuietly(ctx);
  }

  /** Stops fetching; in-flight jobs get `graceMs`, then are aborted and handed back to the queue. */
  async stop(graceMs: number): Promise<void> {
    const { logger, tuning } = this.ctx;
    const worker = this.worker;
    if (worker) {
      const warn = (what: string) => (err: unknown) =>
        logger.warn({ err: errorMessage(err) }, `worker ${what} failed`);
      await worker.pause(true).catch(warn("pause"));
      await settleWithin(this.inflight, graceMs);
      if (this.inflight.size > 0) {
        this.turns.shutdownAll();
        this.bg.shutdownAll();
        await settleWithin(this.inflight, tuning.abortSettleMs);
      }
      if (this.inflight.size > 0) {
        logger.warn(
          { jobs: this.inflight.size },
          "bullmq pipeline: jobs ignored the abort; their locks expire",
        );
      }
      await closeWorker(worker, logger, this.inflight.size > 0);
    }
    this.direct?.stop();
    const connection = this.connection;
    if (connection) await closeClient(connection);
  }

  private process(job: Job, token: string): Promise<void> {
    return this.track(this.inSlot(job, token));
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    const done = () => this.inflight.delete(p);
    p.then(done, done);
    return p;
  }

  private async inSlot(job: Job, token: string): Promise<void> {
    await this.slots.take();
    try {
      return await this.dispatch(job, token);
    } finally {
      this.slots.give();
    }
  }

  private async dispatch(job: Job, token: string): Promise<void> {
    if (this.ctx.stopping()) {
      // Fetched while stopping: give it straight back, untouched.
      await job.moveToWait(token);
      throw new WaitingError();
    }
    switch (job.name) {
      case "drain":
        return this.turns.process(job, token);
      case "bg":
        return this.bg.process(job, token);
      case "sweep":
        return sweepDirty(this.ctx);
      default:
        throw new UnrecoverableError(`unknown job name "${job.name}"`);
    }
  }
}
