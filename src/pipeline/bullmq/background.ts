import { DelayedError, type Job, type JobsOptions, UnrecoverableError, WaitingError } from "bullmq";
import { errorMessage, SwitchboardError } from "../../errors.js";
import { backgroundJobSchema } from "../schema.js";
import { type BackgroundJob, RetryLaterError, UnrecoverableJobError } from "../types.js";
import type { DriverContext } from "./context.js";

/**
 * Background jobs (`spawn`, `a2a`, `announce`, `archive`) are plain BullMQ jobs whose `jobId` is
 * derived from `BackgroundJob.id` (idempotent: BullMQ ignores an add whose id exists, and finished
 * jobs are kept `jobRetention*` long, so a late duplicate is ignored too).
 *
 * The handler's named signals map onto BullMQ's own mechanisms (habit 10):
 * - `RetryLaterError` → `moveToDelayed(now + delayMs)` + `DelayedError` (no attempt used up);
 * - `UnrecoverableJobError` → `UnrecoverableError` (failed at once, never retried);
 * - anything else → BullMQ retries with exponential backoff until `jobMaxAttempts`;
 * - aborted by `stop()` → `moveToWait` + `WaitingError`: handed back, no attempt used up.
 */

interface ActiveJob {
  ac: AbortController;
  shutdown: boolean;
  lostLock: boolean;
}

export function backgroundJobOptions(ctx: DriverContext, jobId: string, delayMs: number): JobsOptions {
  const { tuning } = ctx;
  const keep = { age: tuning.jobRetentionSeconds, count: tuning.jobRetentionCount };
  const opts: JobsOptions = {
    jobId,
    attempts: tuning.jobMaxAttempts,
    backoff: { type: "exponential", delay: tuning.retryBaseMs },
    removeOnComplete: keep,
    removeOnFail: keep,
  };
  if (delayMs > 0) opts.delay = delayMs;
  return opts;
}

export class BackgroundProcessor {
  private readonly active = new Map<string, ActiveJob>();

  constructor(private readonly ctx: DriverContext) {}

  async process(job: Job, token: string): Promise<void> {
    const parsed = backgroundJobSchema.safeParse(job.data);
    if (!parsed.success || !job.id) throw new UnrecoverableError("background job data unreadable");
    const bj: BackgroundJob = parsed.data;
    const jobId = job.id;
    const handlers = this.ctx.handlers();
    if (!handlers) throw new Error("no background handler");
    const active: ActiveJob = { ac: new AbortController(), shutdown: false, lostLock: false };
    this.active.set(jobId, active);
    try {
      await handlers.background(bj, {
        signal: active.ac.signal,
        stillOwner: async () =>
          !active.shutdown &&
          !active.lostLock &&
          (await this.ctx.redis.get(this.ctx.keys.lock(jobId))) === token,
        takeSteering: () => [],
      });
    } catch (err) {
      if (active.shutdown) {
        await job.moveToWait(token);
        throw new WaitingError();
      }
      const log = { jobId: bj.id, kind: bj.kind, attemptsMade: job.attemptsMade, err: errorMessage(err) };
      if (err instanceof RetryLaterError) {
        this.ctx.logger.warn({ ...log, delayMs: err.delayMs }, "background job asked to retry later");
        await job.moveToDelayed(Date.now() + Math.max(0, err.delayMs), token);
        throw new DelayedError();
      }
      if (err instanceof UnrecoverableJobError) {
        this.ctx.logger.error(log, "background job failed; not retried");
        throw new UnrecoverableError(errorMessage(err));
      }
      this.ctx.logger.warn(log, "background job failed; BullMQ retries it while attempts remain");
      throw err;
    } finally {
      this.active.delete(jobId);
    }
  }

  shutdownAll(): void {
    for (const a of this.active.values()) {
      a.shutdown = true;
      a.ac.abort(new SwitchboardError("UNAVAILABLE", "pipeline shutting down"));
    }
  }

  lockLost(jobId: string): void {
    const a = this.active.get(jobId);
    if (!a) return;
    a.lostLock = true;
    a.ac.abort(new SwitchboardError("CONFLICT", "lost the job lock; another worker owns this job"));
  }
}
