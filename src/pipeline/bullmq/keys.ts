/**
 * Every Redis key, channel and BullMQ id the bullmq driver uses (habit 14: one file owns them).
 *
 * Everything lives under ONE Cluster hash tag built from the configured prefix (`sb` → `{sb}`):
 * BullMQ's own keys (its `prefix` option is the tag) and ours, because the commit/ack scripts touch
 * BullMQ's job lock key and our mailbox keys together, so they must share a slot.
 *
 *   {sb}:pipeline:…           BullMQ queue "pipeline" (jobs, wait/active lists, locks, dedup keys)
 *   {sb}:mb:<sessionKey>      mailbox: list of runIds accepted for the session, oldest first
 *   {sb}:act:<sessionKey>     the turn in flight: hash { ids (JSON array), attempt, job }
 *   {sb}:sched:<sessionKey>   "a drain job will look at this mailbox": producers skip queue.add
 *   {sb}:run:<runId>          per-run pipeline state: hash { s (session), st, env (JSON request) }
 *   {sb}:cancel:<runId>       persistent cancel flag for a running run (value: reason), with TTL
 *   {sb}:dirty                set of sessions whose mailbox or turn may need a drain (sweeper)
 *   {sb}:outbox               list of committed follow-ups (JSON) not yet relayed (outbox.ts)
 *   {sb}:bus                  pub/sub channel: cancel and steer broadcasts (every process listens)
 *   {sb}:bus:runs             pub/sub channel: run events (run.finished), heard only by processes
 *                             that want them (waiters, run listeners), so a turn wakes no idle worker
 *   {sb}:live                 pub/sub channel: live events between processes (src/app/live-relay.ts)
 *   {sb}:live:audience        zset of gateways with /ws clients (member: relay id, score: expiry ms)
 */

export const QUEUE_NAME = "pipeline";

/** `sb` → `{sb}`; a prefix that already carries a hash tag (`{x}…`) is used as it is. */
export function hashTag(prefix: string): string {
  return /\{[^{}]+\}/.test(prefix) ? prefix : `{${prefix}}`;
}

export class PipelineKeys {
  /** The hash tag; also BullMQ's `prefix` option. */
  readonly tag: string;
  readonly dirty: string;
  readonly outbox: string;
  readonly bus: string;
  readonly runEvents: string;
  readonly live: string;
  readonly liveAudience: string;
  readonly runPrefix: string;
  readonly cancelPrefix: string;
  /** `<tag>:pipeline:` — BullMQ's key for job `<id>` is this plus the id. */
  readonly jobPrefix: string;

  constructor(prefix: string) {
    this.tag = hashTag(prefix);
    this.dirty = `${this.tag}:dirty`;
    this.outbox = `${this.tag}:outbox`;
    this.bus = `${this.tag}:bus`;
    this.runEvents = `${this.tag}:bus:runs`;
    this.live = `${this.tag}:live`;
    this.liveAudience = `${this.tag}:live:audience`;
    this.runPrefix = `${this.tag}:run:`;
    this.cancelPrefix = `${this.tag}:cancel:`;
    this.jobPrefix = `${this.tag}:${QUEUE_NAME}:`;
  }

  mailbox(sessionKey: string): string {
    return `${this.tag}:mb:${sessionKey}`;
  }

  active(sessionKey: string): string {
    return `${this.tag}:act:${sessionKey}`;
  }

  scheduled(sessionKey: string): string {
    return `${this.tag}:sched:${sessionKey}`;
  }

  run(runId: string): string {
    return this.runPrefix + runId;
  }

  cancel(runId: string): string {
    return this.cancelPrefix + runId;
  }

  /** BullMQ's lock key of a job: holds the token of the worker that owns it (see BullMQ `extendLock`). */
  lock(jobId: string): string {
    return `${this.jobPrefix}${jobId}:lock`;
  }

  /** Pattern matching every key of this pipeline (tests, `doctor`). */
  pattern(): string {
    return `${this.tag.replace(/([*?[\]\\])/g, "\\$1")}:*`;
  }
}

/** Deduplication id of a session's drain job (at most one active + one pending per session). */
export function drainDedupId(sessionKey: string): string {
  return `drain:${sessionKey}`;
}

/**
 * BullMQ job id of a background job. BullMQ 6.7 rejects custom ids that are integers or that
 * contain `:` (unless they split into exactly 3 parts), so `%` and `:` are percent-encoded and a
 * non-numeric `bg-` prefix is added. Reversible: see `backgroundIdOf`.
 */
export function backgroundJobId(id: string): string {
  return `bg-${id.replace(/%/g, "%25").replace(/:/g, "%3A")}`;
}

/** Inverse of `backgroundJobId`; null when `jobId` is not one. */
export function backgroundIdOf(jobId: string): string | null {
  if (!jobId.startsWith("bg-")) return null;
  return jobId.slice(3).replace(/%(25|3A)/g, (_m, code: string) => (code === "25" ? "%" : ":"));
}
