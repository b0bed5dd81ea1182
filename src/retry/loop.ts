/**
 * The one retry loop: run, and after a failure ask `delayFor` how long to wait (undefined: give
 * up and rethrow the failure unchanged). Timers are injected (`sleep`), so tests drive it without
 * waiting; an abort during a wait rejects with `signal.reason`.
 */

/** Waits `ms`; rejects with `signal.reason` as soon as the signal aborts. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

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

export interface RetryLoopOptions {
  /** Wait before the next attempt after failure `err` of attempt `attempt` (0-based); undefined gives up. */
  delayFor: (err: unknown, attempt: number) => number | undefined;
  signal?: AbortSignal | undefined;
  sleep?: Sleep | undefined;
  /** Called before each wait (for logging); `retry` counts from 1. */
  onRetry?: ((info: { retry: number; delayMs: number; err: unknown }) => void) | undefined;
}

/**
 * Runs `run` until it succeeds, `delayFor` gives up, or the signal aborts (a failure after the
 * abort is rethrown at once). Rethrows the last failure unchanged.
 */
export async function retryLoop<T>(run: (attempt: number) => Promise<T>, opts: RetryLoopOptions): Promise<T> {
  const sleep = opts.sleep ?? abortableSleep;
  for (let attempt = 0; ; attempt++) {
    try {
      return await run(attempt);
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      const delayMs = opts.delayFor(err, attempt);
      if (delayMs === undefined) throw err;
      opts.onRetry?.({ retry: attempt + 1, delayMs, err });
      await sleep(delayMs, opts.signal);
    }
  }
}
