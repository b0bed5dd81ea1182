/** Backoff and retry: pure delays (`backoff.ts`) and the one retry loop with injected timers (`loop.ts`). */
export { type BackoffPolicy, backoffDelayMs, parseRetryAfterMs } from "./backoff.js";
export { settleWithin, within } from "./deadline.js";
export { abortableSleep, type RetryLoopOptions, retryLoop, type Sleep } from "./loop.js";
