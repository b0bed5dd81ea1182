/**
 * Pure delay computation for every retry in the gateway: exponential backoff with an optional
 * downward jitter, and the server's own retry-after.
 */

export interface BackoffPolicy {
  /** Delay before the first retry, in ms; doubles per retry. */
  baseDelayMs: number;
  /** Ceiling for one computed delay, in ms (Infinity: none). */
  maxDelayMs: number;
  /** Largest fraction the delay is shortened by at random (0: exact; 0.25: up to a quarter less). */
  jitter?: number;
}

/** Exponential backoff for retry number `retry` (0 = first retry): `base × 2^retry`, capped, jittered down. */
export function backoffDelayMs(
  retry: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number {
  const raw = Math.min(policy.baseDelayMs * 2 ** retry, policy.maxDelayMs);
  const jitter = policy.jitter ?? 0;
  return jitter ? Math.round(raw * (1 - random() * jitter)) : raw;
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
