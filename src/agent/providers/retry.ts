import { setDeadline } from "../../deadlines.js";
import { backoffDelayMs, retryLoop, type Sleep } from "../../retry/index.js";

/**
 * Call policy shared by the HTTP providers: which failures retry, how long to wait, and the
 * per-attempt timeout. The delays and the loop are `src/retry/`'s.
 *
 * The SDKs' own retry loops are switched off (`maxRetries: 0`): theirs sleep without watching
 * the caller's AbortSignal and wait out any retry-after, however long. Ours does both.
 */

export interface RetryPolicy {
  /** Extra attempts after the first (config `models.providers.<id>.maxRetries`, default 2). */
  maxRetries: number;
  /** First backoff delay in ms when the server gives no retry-after; doubles per retry. Default 500. */
  baseDelayMs: number;
  /** Ceiling for one computed backoff delay, in ms. Default 8000. */
  maxDelayMs: number;
  /**
   * A server retry-after longer than this (ms) is not waited out in process: the call fails at once
   * with the mapped error (RateLimitedError carries the delay) so the pipeline can reschedule. Default 60000.
   */
  maxRetryAfterMs: number;
}

/** Computed backoff delays are shortened at random by up to a quarter. */
const JITTER = 0.25;

export const DEFAULT_RETRY_POLICY: Omit<RetryPolicy, "maxRetries"> = {
  baseDelayMs: 500,
  maxDelayMs: 8000,
  maxRetryAfterMs: 60_000,
};

export interface RetryDecision {
  retry: boolean;
  /** The server's own wait (retry-after), in ms, when it sent one. */
  retryAfterMs?: number;
}

export interface RetryOptions {
  policy: RetryPolicy;
  classify: (err: unknown) => RetryDecision;
  signal?: AbortSignal;
  sleep?: Sleep;
  random?: () => number;
  /** Called before each wait; for logging. */
  onRetry?: (info: { retry: number; delayMs: number; err: unknown }) => void;
}

/**
 * Runs `run` until it succeeds, a failure is not retryable, retries are used up, or the signal
 * aborts. Rethrows the last failure unchanged (the caller maps it); an abort during a wait
 * rejects with `signal.reason`.
 */
export function withRetry<T>(run: (attempt: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const { policy } = opts;
  return retryLoop(run, {
    delayFor: (err, attempt) => {
      const decision = opts.classify(err);
      if (!decision.retry || attempt >= policy.maxRetries) return undefined;
      if (decision.retryAfterMs !== undefined && decision.retryAfterMs > policy.maxRetryAfterMs)
        return undefined;
      return decision.retryAfterMs ?? backoffDelayMs(attempt, { ...policy, jitter: JITTER }, opts.random);
    },
    signal: opts.signal,
    sleep: opts.sleep,
    onRetry: opts.onRetry,
  });
}

/** Thrown by `withTimeout` when the attempt, not the caller, ran out of time. */
export class AttemptTimeoutError extends Error {
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = "AttemptTimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/**
 * The part of `AbortSignal` the HTTP paths use (`sendRequest`, `postChat`); an `AbortSignal`
 * fits it, and so does the cheaper `AttemptSignal`.
 */
export interface Abortable {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/**
 * One attempt's abort signal: what `AbortController` gives, without an EventTarget per model call
 * (creating one, and adding and removing its listeners, cost about 5 % of a turn's main-thread
 * instructions). Listeners run once, in the order added; one added after the abort never runs,
 * as with `AbortSignal`. `toAbortSignal()` hands a real one to an SDK that needs it.
 */
export class AttemptSignal implements Abortable {
  aborted = false;
  reason: unknown = undefined;
  private listeners: Array<() => void> = [];
  private real: AbortController | null = null;

  addEventListener(_type: "abort", listener: () => void): void {
    if (!this.aborted) this.listeners.push(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = [];
    for (const l of listeners) {
      try {
        l();
      } catch (err) {
        // as an EventTarget does: a throwing listener is reported, the others still run
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /** A standard `AbortSignal` that aborts with this one (made on first use). */
  toAbortSignal(): AbortSignal {
    if (!this.real) {
      const real = new AbortController();
      this.real = real;
      if (this.aborted) real.abort(this.reason);
      else this.addEventListener("abort", () => real.abort(this.reason));
    }
    return this.real.signal;
  }
}

/**
 * Runs one attempt under its own signal that aborts on the caller's abort or after `timeoutMs`
 * (covering a streamed body too, not only the response headers). Rejects with the caller's
 * `signal.reason` when the caller aborted, and with AttemptTimeoutError on timeout.
 */
export async function withTimeout<T>(
  timeoutMs: number,
  signal: AbortSignal | undefined,
  run: (signal: AttemptSignal) => Promise<T>,
): Promise<T> {
  if (signal?.aborted) throw signal.reason;
  const attempt = new AttemptSignal();
  let timedOut = false;
  const onAbort = () => attempt.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const deadline = setDeadline(timeoutMs, () => {
    timedOut = true;
    attempt.abort(new AttemptTimeoutError(timeoutMs));
  });
  try {
    return await run(attempt);
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (timedOut) throw new AttemptTimeoutError(timeoutMs);
    throw err;
  } finally {
    deadline.cancel();
    signal?.removeEventListener("abort", onAbort);
  }
}

/** Test seams and tuning for the HTTP providers; production passes nothing. */
export interface CallTuning {
  sleep?: Sleep;
  random?: () => number;
  policy?: Partial<Omit<RetryPolicy, "maxRetries">>;
}
