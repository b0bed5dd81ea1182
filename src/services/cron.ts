import type { CronJobConfig } from "../config/schema.js";

/**
 * The cron seam. A driver owns only *when* a job ticks (local: an embedded timer with the next
 * tick journaled in the store's kv; bullmq: BullMQ job schedulers in Redis). Everything else —
 * which job, which session, delivery, the run log, backoff — is the service's (`service.ts`) and
 * the flow's (`flow.ts`), identical for both drivers. Only `src/app/` picks a driver.
 */

export type CronJob = CronJobConfig;

export interface Tick {
  jobId: string;
  /** The scheduled instant this tick stands for (epoch ms); part of the run's idempotent id. */
  tickAt: number;
  /** The tick was missed (gateway down, no worker) and is delivered late: `catchUp` decides. */
  late: boolean;
  /** A retry of a failed `at` job (not a regular tick of its schedule). */
  retry?: boolean;
}

/** Resolves once the tick's turn is durably accepted (or deliberately skipped). Throws to retry later. */
export type TickHandler = (tick: Tick) => Promise<void>;

export interface CronDriver {
  readonly name: "local" | "bullmq";
  /**
   * Starts firing `onTick` for the given jobs (enabled ones; the rest are unscheduled). A job whose
   * schedule is unchanged keeps its pending tick, so a restart neither loses nor doubles one.
   */
  start(jobs: CronJob[], onTick: TickHandler): Promise<void>;
  /** Creates or replaces one job's schedule (a disabled job is unscheduled). Idempotent. */
  put(job: CronJob): Promise<void>;
  /** Removes a job's schedule and any pending tick. Idempotent. */
  remove(jobId: string): Promise<void>;
  /** One extra tick of `jobId` at `atMs` (retry of a failed `at` job). Same (job, atMs) twice = one tick. */
  retryAt(jobId: string, atMs: number): Promise<void>;
  /** The next tick the driver will fire for `jobId`, or null when none is pending. */
  nextRunAt(jobId: string): Promise<number | null>;
  /** Stops firing; pending ticks stay durable. Waits for an in-flight tick. */
  stop(): Promise<void>;
}

/** One line of a job's run log (`cron runs <id>`). */
export interface CronRunEntry {
  runId: string;
  jobId: string;
  sessionKey: string;
  /** The tick it stands for (manual runs: the request time). */
  tickAt: number;
  trigger: "schedule" | "catch-up" | "manual" | "retry";
  status: "queued" | "ok" | "error" | "timeout" | "aborted" | "skipped";
  startedAt: number;
  endedAt?: number;
  durationMs?: number;
  replyPreview?: string;
  error?: string;
  /** What happened to the reply: sent, skipped (NO_REPLY), blocked by policy, failed, none. */
  delivery?: string;
}

/** Per-job bookkeeping shared by every process (store kv). */
export interface CronJobState {
  /** Consecutive failures; 0 after a success. */
  failures: number;
  /** Scheduled ticks before this instant are skipped (backoff after failures). */
  backoffUntil?: number;
  /** Newest tick handed to the pipeline. */
  lastTick?: number;
  /** An `at` job that has run to its end (kept with deleteAfterRun false, or a config job). */
  done?: boolean;
  lastRun?: { runId: string; status: CronRunEntry["status"]; at: number; durationMs?: number };
}

/** A runtime job as stored (config jobs live in the config file). */
export interface StoredCronJob {
  job: CronJob;
  createdAt: number;
  /** The session that created it (the `cron` tool), when one did. */
  createdBy?: string;
}

export interface CronJobView {
  id: string;
  agentId: string;
  schedule: CronJob["schedule"];
  enabled: boolean;
  nextRunAt: number | null;
  lastRun?: { status: string; at: number; durationMs?: number };
  message: string;
  model?: string;
  session: CronJob["session"];
  delivery: CronJob["delivery"];
  catchUp: CronJob["catchUp"];
  deleteAfterRun?: boolean;
  source: "config" | "runtime";
  createdBy?: string;
  failures: number;
  backoffUntil?: number;
}

/** A job as found: config jobs and runtime jobs (added with the tool or RPC). */
export interface CronJobRef {
  job: CronJob;
  source: "config" | "runtime";
  createdBy?: string;
}

/**
 * What the tools and RPC methods use of the cron service (`services.cron`). An interface here,
 * low in the tree, so `src/services.ts` does not import the service (which imports services).
 */
export interface CronJobs {
  readonly driverName: string;
  start(driver: CronDriver): Promise<void>;
  stop(): Promise<void>;
  getJob(id: string): Promise<CronJobRef | null>;
  view(j: CronJobRef): Promise<CronJobView>;
  list(filter?: { agentId?: string }): Promise<CronJobView[]>;
  add(input: unknown, opts?: { createdBy?: string }): Promise<CronJobView>;
  update(id: string, patch: Record<string, unknown>): Promise<CronJobView>;
  remove(id: string): Promise<void>;
  runs(jobId: string, limit?: number): Promise<CronRunEntry[]>;
  /** `cause`: the span that asks (the cron tool's call; telemetry/trace.ts), which the run's trace links to. */
  runNow(id: string, cause?: string): Promise<{ runId: string; status: "accepted" }>;
  state(jobId: string): Promise<CronJobState>;
  fire(
    tick: Tick & { trigger?: "manual"; cause?: string },
  ): Promise<{ runId: string; sessionKey: string } | null>;
  pruneIsolated(): Promise<number>;
}
