/**
 * Call policy shared by the HTTP providers: which failures retry, how long to wait, and the
 * per-attempt timeout. One module so the rules are tested row by row (STYLE habit 11).
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

export const DEFAULT_RETRY_POLICY: Omit<RetryPolicy, "maxRetries"> = {
  baseDelayMs: 500,
  maxDelayMs: 8000,
  maxRetryAfterMs: 60_000,
};

/** Waits `ms`; rejects with `signal.reason` as soon as the signal aborts. Injectable for tests. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export interface RetryDecision {
  retry: boolean;
  /** The server's own wait (retry-after), in ms, when it sent one. */
  retryAfterMs?: number;
}

export const abortableSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/** Exponential backoff for retry number `retry` (0 = first retry), with up to 25% downward jitter. */
export function backoffDelayMs(
  retry: number,
  policy: Pick<RetryPolicy, "baseDelayMs" | "maxDelayMs">,
  random: () => number = Math.random,
): number {
  const raw = Math.min(policy.baseDelayMs * 2 ** retry, policy.maxDelayMs);
  return Math.round(raw * (1 - random() * 0.25));
}

interface HeaderReader {
  get(name: string): string | null;
}

/**
 * The server's requested wait in ms: `retry-after-ms` (OpenAI's extension), else `retry-after` as
 * seconds (decimals allowed) or an HTTP date. Undefined when absent or unparseable.
 */
export function parseRetryAfterMs(
  headers: HeaderReader | undefined,
  now: number = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get("retry-after-ms");
  if (ms !== null && ms.trim() !== "") {
    const v = Number(ms);
    if (Number.isFinite(v) && v >= 0) return v;
  }
  const ra = headers.get("retry-after");
  if (ra === null || ra.trim() === "") return undefined;
  const secs = Number(ra);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const date = Date.parse(ra);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
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
export async function withRetry<T>(run: (attempt: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const sleep = opts.sleep ?? abortableSleep;
  for (let attempt = 0; ; attempt++) {
    try {
      return await run(attempt);
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      const decision = opts.classify(err);
      if (!decision.retry || attempt >= opts.policy.maxRetries) throw err;
      if (decision.retryAfterMs !== undefined && decision.retryAfterMs > opts.policy.maxRetryAfterMs)
        throw err;
      const delayMs = decision.retryAfterMs ?? backoffDelayMs(attempt, opts.policy, opts.random);
      opts.onRetry?.({ retry: attempt + 1, delayMs, err });
      await sleep(delayMs, opts.signal);
    }
  }
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
 * Runs one attempt under its own AbortSignal that fires on the caller's abort or after
 * `timeoutMs` (covering a streamed body too, not only the response headers). Rejects with the
 * caller's `signal.reason` when the caller aborted, and with AttemptTimeoutError on timeout.
 */
export async function withTimeout<T>(
  timeoutMs: number,
  signal: AbortSignal | undefined,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  if (signal?.aborted) throw signal.reason;
  const controller = new AbortController();
  let timedOut = false;
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new AttemptTimeoutError(timeoutMs));
  }, timeoutMs);
  try {
    return await run(controller.signal);
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (timedOut) throw new AttemptTimeoutError(timeoutMs);
    throw err;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/** Test seams and tuning for the HTTP providers; production passes nothing. */
export interface CallTuning {
  sleep?: Sleep;
  random?: () => number;
  policy?: Partial<Omit<RetryPolicy, "maxRetries">>;
}
