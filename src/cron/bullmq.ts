import { type Job, Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { everyMs, parseInstant } from "../config/schedule.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import { closeConsumer } from "../redis/close.js";
import type { CronDriver, CronJob, TickHandler } from "../services/cron.js";

/**
 * Cron on BullMQ job schedulers (`queue.driver: "bullmq"`). Every gateway upserts the same
 * scheduler ids; BullMQ keeps ONE delayed job per scheduler with the id `repeat:<id>:<millis>`
 * and creates the next one only when a worker takes the current one, so one tick runs once across
 * any number of gateways and workers. Missed ticks collapse into one late job (never back-filled);
 * `late` tells the service so `catchUp: "skip"` can drop it. `at` jobs are plain delayed jobs
 * with a deterministic id. The run id derived from the tick is the second guard (service.ts).
 */

export const CRON_QUEUE = "cron";
/** A tick delivered this much after its instant counts as missed (`catchUp` applies). */
export const LATE_AFTER_MS = 60_000;

const JOB_OPTS = { removeOnComplete: { count: 200 }, removeOnFail: { count: 200 } } as const;

export interface BullmqCronOptions {
  /** Shared command connection (the composition root owns and closes it). */
  connection: Redis;
  /** A new blocking connection for the worker (closed here). */
  createBlockingConnection: () => Redis;
  /** BullMQ prefix (a hash tag, e.g. `{sb:queue}`). */
  prefix: string;
  logger: Logger;
  /** Run a worker here (gateways and workers do; an enqueue-only process may not). */
  work?: boolean;
  now?: () => number;
}

function atJobId(jobId: string, atMs: number, retry: boolean): string {
  // BullMQ custom ids may not contain ":".
  return `${retry ? "retry" : "at"}-${jobId}-${atMs}`;
}

export class BullmqCronDriver implements CronDriver {
  readonly name = "bullmq" as const;
  readonly #queue: Queue;
  #worker: Worker | null = null;
  #blocking: Redis | null = null;

  constructor(private readonly opts: BullmqCronOptions) {
    this.#queue = new Queue(CRON_QUEUE, { connection: opts.connection, prefix: opts.prefix });
    this.#queue.on("error", (err) => opts.logger.warn({ err: errorMessage(err) }, "cron queue error"));
  }

  #now(): number {
    return (this.opts.now ?? Date.now)();
  }

  async start(jobs: CronJob[], onTick: TickHandler): Promise<void> {
    for (const job of jobs) await this.put(job);
    if (this.opts.work === false || this.#worker) return;
    const blocking = this.opts.createBlockingConnection();
    this.#blocking = blocking;
    const worker = new Worker(CRON_QUEUE, (job: Job) => this.#process(job, onTick), {
      connection: blocking,
      prefix: this.opts.prefix,
      concurrency: 4,
      autorun: false,
    });
    worker.on("error", (err) => this.opts.logger.warn({ err: errorMessage(err) }, "cron worker error"));
    worker.on("failed", (job, err) =>
      this.opts.logger.warn(
        { jobId: job?.id, err: errorMessage(err) },
        "cron tick failed; BullMQ retries it",
      ),
    );
    this.#worker = worker;
    worker
      .run()
      .catch((err: unknown) => this.opts.logger.error({ err: errorMessage(err) }, "cron worker stopped"));
    await worker.waitUntilReady();
  }

  async #process(job: Job, onTick: TickHandler): Promise<void> {
    const data = job.data as { jobId?: unknown; atMs?: unknown; retry?: unknown };
    if (typeof data.jobId !== "string") return;
    // Scheduler jobs are named `repeat:<schedulerId>:<tickMillis>`; `at` jobs carry the tick in their data.
    const fromId = /^repeat:.+:(\d+)$/.exec(job.id ?? "")?.[1];
    const tickAt =
      typeof data.atMs === "number"
        ? data.atMs
        : fromId !== undefined
          ? Number(fromId)
          : typeof job.opts.prevMillis === "number"
            ? job.opts.prevMillis
            : job.timestamp;
    await onTick({
      jobId: data.jobId,
      tickAt,
      late: this.#now() - tickAt > LATE_AFTER_MS,
      ...(data.retry === true ? { retry: true } : {}),
    });
  }

  async put(job: CronJob): Promise<void> {
    const s = job.schedule;
    if (!job.enabled) {
      await this.remove(job.id);
      return;
    }
    if (!("at" in s)) {
      // Re-upserting an unchanged scheduler would reset it (an `every` job fires at once on upsert),
      // so a gateway starting up leaves a scheduler that already matches alone.
      const cur = await this.#queue.getJobScheduler(job.id);
      const same =
        cur &&
        ("cron" in s
          ? cur.pattern === s.cron && (cur.tz ?? "UTC") === (s.tz ?? "UTC")
          : Number(cur.every) === everyMs(s));
      if (same) return;
    }
    if ("cron" in s) {
      await this.#queue.upsertJobScheduler(
        job.id,
        { pattern: s.cron, tz: s.tz ?? "UTC" },
        { name: "tick", data: { jobId: job.id }, opts: JOB_OPTS },
      );
    } else if ("every" in s) {
      await this.#queue.upsertJobScheduler(
        job.id,
        { every: everyMs(s) ?? 60_000 },
        { name: "tick", data: { jobId: job.id }, opts: JOB_OPTS },
      );
    } else {
      await this.#queue.removeJobScheduler(job.id);
      const at = parseInstant(s.at);
      if (at === null) return;
      // A deterministic id: every gateway adding it at start yields one job.
      await this.#queue.add(
        "tick",
        { jobId: job.id, atMs: at },
        { ...JOB_OPTS, jobId: atJobId(job.id, at, false), delay: Math.max(0, at - this.#now()) },
      );
    }
  }

  async remove(jobId: string): Promise<void> {
    await this.#queue.removeJobScheduler(jobId);
    // Pending `at`/retry jobs of this id are left to expire: the service skips ticks of unknown jobs.
  }

  async retryAt(jobId: string, atMs: number): Promise<void> {
    await this.#queue.add(
      "tick",
      { jobId, atMs, retry: true },
      { ...JOB_OPTS, jobId: atJobId(jobId, atMs, true), delay: Math.max(0, atMs - this.#now()) },
    );
  }

  async nextRunAt(jobId: string): Promise<number | null> {
    const sch = await this.#queue.getJobScheduler(jobId);
    if (sch?.next !== undefined && sch.next !== null) return Number(sch.next);
    // `at` jobs and retries: the earliest delayed job of this id.
    let best: number | null = null;
    for (const j of await this.#queue.getDelayed(0, 200)) {
      const d = j.data as { jobId?: unknown; atMs?: unknown };
      if (d.jobId === jobId && typeof d.atMs === "number" && (best === null || d.atMs < best)) best = d.atMs;
    }
    return best;
  }

  async stop(): Promise<void> {
    const parts = { worker: this.#worker, blocking: this.#blocking, queue: this.#queue };
    this.#worker = null;
    this.#blocking = null;
    await closeConsumer(parts, this.opts.logger);
  }
}
