/**
 * Per-key serial execution inside this process (both store drivers): tasks for one key run one
 * after another in call order; different keys run concurrently; a failed task does not stop the
 * ones behind it. For redis it keeps this process's own read-modify-writes from racing each other,
 * so revision conflicts (and retries) happen only between processes.
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
