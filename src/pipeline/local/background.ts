import { MAX_TIMER_MS } from "../../deadlines.js";

/**
 * When background jobs become runnable: a FIFO of due job ids plus one timer per delayed job.
 * The jobs themselves live in the journal model; this only orders ids by readiness.
 */

export class BackgroundQueue {
  private ready: string[] = [];
  private head = 0;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(
    private readonly now: () => number,
    private readonly onReady: () => void,
  ) {}

  /** Runnable at `dueAt` (epoch ms per `now`); overdue jobs are ready at once. */
  schedule(id: string, dueAt: number): void {
    if (this.stopped) return;
    const existing = this.timers.get(id);
    if (existing) clearTimeout(existing);
    this.timers.delete(id);
    const delay = dueAt - this.now();
    if (delay <= 0) {
      this.ready.push(id);
      this.onReady();
      return;
    }
    // a delay beyond what one timer can wait is waited for in steps (schedule re-arms)
    const timer = setTimeout(
      () => {
        this.timers.delete(id);
        this.schedule(id, dueAt);
      },
      Math.min(delay, MAX_TIMER_MS),
    );
    this.timers.set(id, timer);
  }

  /** Next due job id, oldest first; null when none is due. */
  take(): string | null {
    if (this.head >= this.ready.length) {
      this.ready = [];
      this.head = 0;
      return null;
    }
    const id = this.ready[this.head++]!;
    if (this.head > 1024 && this.head * 2 > this.ready.length) {
      this.ready = this.ready.slice(this.head);
      this.head = 0;
    }
    return id;
  }

  delayedCount(): number {
    return this.timers.size;
  }

  /** Cancels every timer (shutdown). Delayed jobs stay in the journal and are re-armed on restart. */
  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }
}
