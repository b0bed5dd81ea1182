/**
 * Per-key serial execution inside this process (both store drivers): tasks for one key run one
 * after another in call order; different keys run concurrently; a failed task does not stop the
 * ones behind it. For redis it keeps this process's own read-modify-writes from racing each other,
 * so revision conflicts (and retries) happen only between processes.
 */

/** A key's last task: settled once it and everything queued before it for the key has. */
interface Tail {
  promise: Promise<void>;
  settled: boolean;
}

/**
 * Settled keys are dropped in sweeps once this many have gathered, not one by one: a Map taken
 * back to empty after every task (a session's store calls, one at a time) reallocated its table
 * on each add and delete, a few hundred bytes of garbage per call.
 */
const SETTLED_SWEEP = 256;

export class KeyedSerial {
  private readonly tails = new Map<string, Tail>();
  private settled = 0;

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key);
    if (prev?.settled) this.settled--;
    // nothing of this key still running: start now, without a hop through the old tail
    const result = prev && !prev.settled ? prev.promise.then(task) : task();
    const tail: Tail = { promise: result.then(noop, noop), settled: false };
    this.tails.set(key, tail);
    void tail.promise.then(() => {
      if (this.tails.get(key) !== tail) return; // a later task is the key's tail now
      tail.settled = true;
      if (++this.settled >= SETTLED_SWEEP) this.sweep();
    });
    return result;
  }

  /** Keys held (running, queued or settled and not swept yet): bounded by what runs + SETTLED_SWEEP. */
  get size(): number {
    return this.tails.size;
  }

  /** Resolves when every task queued so far has settled. */
  async drain(): Promise<void> {
    for (;;) {
      const open = [...this.tails.values()].filter((t) => !t.settled).map((t) => t.promise);
      if (open.length === 0) return;
      await Promise.all(open);
    }
  }

  private sweep(): void {
    for (const [key, t] of this.tails) if (t.settled) this.tails.delete(key);
    this.settled = 0;
  }
}

function noop(): undefined {
  return undefined;
}
