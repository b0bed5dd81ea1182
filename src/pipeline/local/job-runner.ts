import { errorMessage, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { JobHandlers } from "../types.js";
import type { BackgroundQueue } from "./background.js";
import type { QueueJournal } from "./journal.js";
import type { LiveJob } from "./journal-model.js";
import { decideRetry } from "./retry.js";

/**
 * Runs one background job and applies the retry policy (`retry.ts`) to its failure. A job aborted
 * by shutdown stays live in the journal and runs again after a restart.
 */

export interface JobRunnerDeps {
  logger: Logger;
  now: () => number;
  journal: () => QueueJournal | null;
  handlers: () => JobHandlers | null;
  queue: BackgroundQueue;
  policy: { maxAttempts: number; baseMs: number };
}

interface ActiveJob {
  ac: AbortController;
  shutdown: boolean;
}

export class JobRunner {
  private readonly active = new Map<string, ActiveJob>();

  constructor(private readonly d: JobRunnerDeps) {}

  isRunning(id: string): boolean {
    return this.active.has(id);
  }

  shutdownAll(): void {
    for (const job of this.active.values()) {
      job.shutdown = true;
      job.ac.abort(new SwitchboardError("UNAVAILABLE", "pipeline shutting down"));
    }
  }

  async run(live: LiveJob): Promise<void> {
    const { job } = live;
    const active: ActiveJob = { ac: new AbortController(), shutdown: false };
    this.active.set(job.id, active);
    try {
      const handlers = this.d.handlers();
      if (!handlers) throw new Error("no background handler");
      await handlers.background(job, {
        signal: active.ac.signal,
        stillOwner: async () => !active.shutdown,
        takeSteering: () => [],
      });
      this.d.journal()?.note({ t: "jobdone", id: job.id });
    } catch (err) {
      if (active.shutdown) return;
      const d = decideRetry(err, live.attempts, this.d.policy);
      const log = {
        jobId: job.id,
        kind: job.kind,
        attempts: d.attempts,
        reason: d.reason,
        err: errorMessage(err),
      };
      if (d.action === "retry") {
        const dueAt = this.d.now() + d.delayMs;
        this.d.journal()?.note({ t: "jobretry", id: job.id, dueAt, attempts: d.attempts });
        this.d.logger.warn({ ...log, delayMs: d.delayMs }, "background job failed; will retry");
        this.d.queue.schedule(job.id, dueAt);
      } else {
        this.d.logger.error(log, "background job failed; dropped");
        this.d.journal()?.note({ t: "jobdone", id: job.id });
      }
    } finally {
      this.active.delete(job.id);
    }
  }
}
