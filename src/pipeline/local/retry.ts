import { backoffDelayMs } from "../../retry/index.js";
import { RetryLaterError, UnrecoverableJobError } from "../types.js";

/**
 * The one place that decides what happens after a background job's handler throws.
 * - `RetryLaterError` → run again after exactly its `delayMs`; it does not use up an attempt
 *   (a platform rate limit is not the job's fault).
 * - `UnrecoverableJobError` → drop now.
 * - anything else → retry with exponential backoff (`baseMs × 2^(n-1)` before retry n) until
 *   `maxAttempts` executions have failed, then drop.
 */

export type RetryDecision =
  | { action: "retry"; delayMs: number; attempts: number; reason: string }
  | { action: "drop"; attempts: number; reason: string };

export function decideRetry(
  err: unknown,
  failedBefore: number,
  policy: { maxAttempts: number; baseMs: number },
): RetryDecision {
  if (err instanceof RetryLaterError) {
    return {
      action: "retry",
      delayMs: Math.max(0, err.delayMs),
      attempts: failedBefore,
      reason: "retry-later",
    };
  }
  const attempts = failedBefore + 1;
  if (err instanceof UnrecoverableJobError) return { action: "drop", attempts, reason: "unrecoverable" };
  if (attempts >= policy.maxAttempts) return { action: "drop", attempts, reason: "attempts-exhausted" };
  const delayMs = backoffDelayMs(attempts - 1, {
    baseDelayMs: policy.baseMs,
    maxDelayMs: Number.POSITIVE_INFINITY,
  });
  return { action: "retry", delayMs, attempts, reason: "failed" };
}
