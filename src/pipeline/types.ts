import type { ModelFallback, Provenance, RunRecord, RunStatus, Usage } from "../store/types.js";

/**
 * The pipeline contract. Two drivers (`local/`, `bullmq/`) implement it with the same observable
 * semantics, proven by `test/contract/pipeline.ts`:
 * - turns of one session never overlap and start in arrival order (one lane per session);
 * - different sessions run in parallel up to `queue.concurrency`;
 * - a job is durable once `submit*` resolves (journal / Redis) and survives a restart;
 * - `wait` is served from the run record, so it works long after the run ended;
 * - a turn's `followUps` are committed atomically with its final status and then submitted, each
 *   exactly once (transactional outbox), also across a crash right after the run ended.
 * Deliberately outside: what a turn does (the runtime) and where replies go (delivery).
 */

export type JobKind = "turn" | "spawn" | "a2a" | "announce" | "archive" | "wake";

/**
 * Who asked for a turn. Chat input: `inbound` (a platform message), `operator` (`chat.send`, the
 * web chat), `command` (a session command's turn); scheduled and webhook turns: `cron`, `hook`;
 * the flows: `sessions_send` (the primary run of a send), `a2a` (its reply-back and announce
 * steps), `spawn` (a sub-agent's run), `announce` (a requester woken by a completion or a yield).
 */
export const TURN_ORIGINS = [
  "inbound",
  "operator",
  "command",
  "cron",
  "hook",
  "sessions_send",
  "a2a",
  "spawn",
  "announce",
] as const;
export type TurnOrigin = (typeof TURN_ORIGINS)[number];

/** One inbound message for a session's lane. */
export interface TurnRequest {
  sessionKey: string;
  agentId: string;
  text: string;
  provenance?: Provenance;
  /** Deliver the final reply to the session's chat (inbound auto-replies, `chat.send` with deliver). */
  deliver: boolean;
  /** Who asked (see `TurnOrigin`); decides collect mode and what follows the run. */
  origin: TurnOrigin;
  /** Extra system context for this turn only (inter-session envelopes, announce instructions). */
  extraSystem?: string;
  /** Abort the run with outcome `timeout` after this long (0 = none). */
  timeoutMs?: number;
  /** Idempotency: a second submit with the same runId is ignored and returns the first record. */
  runId?: string;
  /** Opaque data the turn handler gets back (e.g. a2a follow-up instructions, reply target). */
  meta?: Record<string, unknown>;
}

/** A turn as the handler receives it: possibly several collected messages in one run. */
export interface TurnJob {
  runId: string;
  sessionKey: string;
  agentId: string;
  messages: Array<{
    runId: string;
    text: string;
    provenance?: Provenance;
    extraSystem?: string;
    meta?: Record<string, unknown>;
  }>;
  deliver: boolean;
  origin: TurnOrigin;
  timeoutMs: number;
  meta?: Record<string, unknown>;
  /** 1 on first execution; >1 when re-run after a crash (side effects must be idempotent). */
  attempt: number;
}

export interface TurnResult {
  status: Extract<RunStatus, "ok" | "error" | "timeout" | "aborted">;
  reply?: string;
  error?: string;
  usage?: Usage;
  model?: string;
  /** Models of the chain that failed first, in order (API.md §8.4). */
  fallbacks?: ModelFallback[];
  /** Set when the reply could not be delivered (recorded on the run, never lost silently). */
  deliveryError?: string;
  /**
   * Work this run causes (transactional outbox): the driver writes these together with the final
   * status in one atomic step (one journal record / one Lua script), then submits each with its
   * deterministic id. A run recorded `ok` therefore always gets its follow-ups, exactly once.
   */
  followUps?: FollowUp[];
}

/** What the agent runtime hands the turn handler: the result, and whether the turn yielded. */
export interface TurnOutcome extends TurnResult {
  yielded?: boolean;
}

/**
 * One follow-up of a finished turn. Its id (the job id, or the turn's runId) is derived from the
 * run that caused it, so submitting it again (a re-run, a relay after a crash) is a no-op.
 */
export type FollowUp =
  | { type: "job"; job: BackgroundJob; delayMs?: number }
  | { type: "turn"; turn: TurnRequest & { runId: string } };

/** The idempotency id of a follow-up (unique across both types). */
export function followUpId(f: FollowUp): string {
  return f.type === "job" ? `job:${f.job.id}` : `turn:${f.turn.runId}`;
}

/** Background jobs that are not turns of a lane. `id` makes submission idempotent. */
export interface BackgroundJob {
  kind: Exclude<JobKind, "turn">;
  id: string;
  data: Record<string, unknown>;
}

export interface JobContext {
  /** Aborted on cancel, timeout, shutdown or lost lock. */
  signal: AbortSignal;
  /**
   * Fencing: false once this worker no longer owns the job (another took over after a stall).
   * Check before committing side effects.
   */
  stillOwner(): Promise<boolean>;
  /** Guidance sent with `steer` while the turn runs; the runtime drains it before each model call. */
  takeSteering(): string[];
}

export interface JobHandlers {
  /**
   * Optional, and optionally called: a pipeline whose marking of the runs as running is a round
   * trip (bullmq) calls it with the turn's job right before that write, and `turn` with the same
   * job once the runs are running. The handler may start the reads its turn begins with, so that
   * they ride beside the write; it writes nothing and throws nothing here. When the write fails,
   * no `turn` follows: what was started is dropped with the job.
   */
  prepareTurn?(job: TurnJob): void;
  turn(job: TurnJob, ctx: JobContext): Promise<TurnResult>;
  background(job: BackgroundJob, ctx: JobContext): Promise<void>;
}

/** Thrown by handlers: never retry (input that can never succeed). */
export class UnrecoverableJobError extends Error {
  override name = "UnrecoverableJobError";
}

/** Thrown by handlers: try again after `delayMs` (platform rate limits). */
export class RetryLaterError extends Error {
  override name = "RetryLaterError";
  constructor(
    message: string,
    readonly delayMs: number,
  ) {
    super(message);
  }
}

export interface SessionQueueInfo {
  /** Messages waiting in the lane (not yet in a turn). */
  pending: number;
  /** runId of the running turn, if any. */
  activeRunId?: string;
}

export interface Pipeline {
  readonly driver: "local" | "bullmq";
  /** Starts processing with these handlers (workers). Gateways that only enqueue may skip it. */
  start(handlers: JobHandlers): Promise<void>;
  /** Stops taking work; waits for in-flight jobs up to `graceMs`, then aborts and hands them back. */
  stop(graceMs?: number): Promise<void>;
  /** Durably accepts a message into the session's lane; resolves with the queued run record. */
  submitTurn(req: TurnRequest): Promise<RunRecord>;
  /** Durably accepts a background job, optionally delayed. Same `id` twice = one job. */
  submit(job: BackgroundJob, opts?: { delayMs?: number }): Promise<void>;
  /** Waits for a run to reach a final status, up to `timeoutMs`; returns the record as it then is. */
  wait(runId: string, timeoutMs: number): Promise<RunRecord | null>;
  /** Cancels a queued or running run from any process. true if it was not already final. */
  cancel(runId: string, reason: "aborted" | "timeout"): Promise<boolean>;
  /** Sends steering text to a running run. false when it is not running. */
  steer(runId: string, text: string): Promise<boolean>;
  queueInfo(sessionKey: string): Promise<SessionQueueInfo>;
  /** Work accepted and not started, for `switchboard_queue_depth` (local: lane messages; bullmq: jobs waiting for a worker). */
  depth?(): Promise<number>;
  /** Subscribe to run lifecycle events (this process's view). Returns an unsubscribe function. */
  onRunEvent(listener: (event: RunEvent) => void): () => void;
}

export type RunEvent = { type: "run.started"; run: RunRecord } | { type: "run.finished"; run: RunRecord };

/**
 * The run record of an accepted turn, before it runs: both drivers write it at accept and rebuild
 * it from the accepted request later (a lost record, a bullmq worker's write against it), so it
 * must depend on nothing but its arguments.
 */
export function queuedRecord(runId: string, req: TurnRequest, createdAt: number): RunRecord {
  return {
    runId,
    sessionKey: req.sessionKey,
    agentId: req.agentId,
    status: "queued",
    createdAt,
    origin: req.origin,
    deliver: req.deliver,
  };
}

/**
 * Collect mode (`queue.mode = "collect"`): when a lane frees, the pending messages at its head are
 * folded into ONE turn while each next message `canCollect` with the FIRST one; the run stops at the
 * first message that cannot (FIFO is never broken by skipping over it). Only plain chat input is
 * folded: origins in `COLLECTABLE_ORIGINS` (the `TurnOrigin` union decides; no flag in `meta`), the
 * same agent, `deliver` and `timeoutMs`. Everything else (commands, cron, hooks, sessions_send, a2a,
 * announce, spawn, …) carries per-message follow-up semantics and is always its own run. Every driver uses this one rule.
 */
export const COLLECTABLE_ORIGINS: ReadonlySet<TurnOrigin> = new Set<TurnOrigin>(["inbound", "operator"]);

export function canCollect(first: TurnRequest, next: TurnRequest): boolean {
  return (
    COLLECTABLE_ORIGINS.has(first.origin) &&
    next.origin === first.origin &&
    next.agentId === first.agentId &&
    next.deliver === first.deliver &&
    (next.timeoutMs ?? 0) === (first.timeoutMs ?? 0)
  );
}
