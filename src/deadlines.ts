/**
 * Timers for the hot path: `setDeadline(ms, fn)` runs `fn` once `ms` have passed, unless cancelled
 * first. Every model call, turn and `chat.send` wait sets such a timeout and nearly always
 * cancels it; with a Node timer each, every one of them was an insertion into and a removal from
 * Node's timer lists (and, when the list for that length emptied, from its priority queue).
 *
 * Timeouts of one length end in the order they were set, so one queue per length, oldest first,
 * needs one timer, set for its oldest entry: a cancelled entry just leaves the queue, and the
 * timer, when it fires, runs what is due and is set again for the oldest entry still waiting. The
 * timers never hold the process open (as `unref`): what waits on a timeout here is waiting on
 * its own socket, turn or request, which does. A deadline further away than one Node timer can
 * wait (`MAX_TIMER_MS`, ~24.8 days) is waited for in steps, so callers need not clamp. Lengths
 * beyond the first 64 seen get a queue of their own each time (so a caller-chosen length cannot
 * grow the table).
 */
/** The longest delay `setTimeout` takes: above it, Node fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Deadline {
  /** The callback will not run (a no-op once it ran). */
  cancel(): void;
}

interface Entry extends Deadline {
  at: number;
  fn: () => void;
}

class Queue {
  private readonly waiting = new Set<Entry>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly ms: number) {}

  add(fn: () => void): Deadline {
    const waiting = this.waiting;
    const entry: Entry = {
      at: performance.now() + this.ms,
      fn,
      cancel: () => {
        waiting.delete(entry);
      },
    };
    waiting.add(entry);
    if (!this.timer) this.arm(entry.at);
    return entry;
  }

  private arm(at: number): void {
    const delay = Math.min(Math.max(0, at - performance.now()), MAX_TIMER_MS);
    this.timer = setTimeout(() => this.fire(), delay);
    this.timer.unref();
  }

  private fire(): void {
    this.timer = null;
    const now = performance.now();
    let failure: { err: unknown } | null = null;
    for (const entry of this.waiting) {
      if (entry.at > now) {
        this.arm(entry.at);
        break;
      }
      this.waiting.delete(entry);
      try {
        entry.fn();
      } catch (err) {
        failure ??= { err }; // the others still run; the first failure is thrown as a timer's would be
      }
    }
    if (failure) throw failure.err;
  }
}

const queues = new Map<number, Queue>();

/** Runs `fn` after `ms` milliseconds (≥ 0) unless the returned deadline is cancelled first. */
export function setDeadline(ms: number, fn: () => void): Deadline {
  let queue = queues.get(ms);
  if (!queue) {
    queue = new Queue(ms);
    if (queues.size < 64) queues.set(ms, queue);
  }
  return queue.add(fn);
}
