/**
 * Per-key serial execution: tasks for one key run one after another in call order; tasks for
 * different keys run concurrently. A failed task does not stop the ones queued behind it.
 */
export class KeyedSerial {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key);
    const result = prev ? prev.then(task) : task();
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Resolves when every task queued so far has settled. */
  async drain(): Promise<void> {
    while (this.tails.size > 0) await Promise.all([...this.tails.values()]);
  }
}
