import type { Logger } from "../../log.js";
import { backoffDelayMs } from "../../retry/index.js";

/**
 * A platform saying "another connection holds this account" (Telegram's 409 on getUpdates,
 * WhatsApp's connection-replaced): never the end of a connection. Each conflict in a row waits
 * longer (1 s doubling to 30 s, jittered down), and the warning is logged at most once a minute
 * with the count since the last one, so two processes on one token do not flood the log.
 */

const POLICY = { baseDelayMs: 1000, maxDelayMs: 30_000, jitter: 0.25 };
const LOG_EVERY_MS = 60_000;

export class ConflictBackoff {
  #streak = 0;
  #suppressed = 0;
  #loggedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly log: Logger,
    /** What to tell the operator (why it happens, what to do). */
    private readonly advice: string,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Conflicts in a row since the last success. */
  get streak(): number {
    return this.#streak;
  }

  /** Records one conflict; returns how long to wait before the next attempt. */
  conflict(detail: string): number {
    const delayMs = backoffDelayMs(Math.min(this.#streak, 10), POLICY);
    this.#streak++;
    const t = this.now();
    if (t - this.#loggedAt >= LOG_EVERY_MS) {
      this.log.warn(
        { detail, retryInMs: delayMs, conflicts: this.#suppressed + 1 },
        `${this.advice} (retrying with backoff; logged at most once a minute)`,
      );
      this.#loggedAt = t;
      this.#suppressed = 0;
    } else this.#suppressed++;
    return delayMs;
  }

  /** The connection works again: the next conflict starts from the shortest wait. */
  ok(): void {
    if (this.#streak > 0) this.log.info({ conflicts: this.#streak }, "conflict over: connection holds again");
    this.#streak = 0;
  }
}
