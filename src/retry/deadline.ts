/**
 * Bounded waits for shutdown paths: nothing a stop awaits may hang it (a Redis client between
 * reconnect attempts, a handler that ignores its abort).
 */

/** The value of `p`, or undefined when it is not settled within `ms` (or rejects). */
export async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p.catch(() => undefined),
      new Promise<undefined>((r) => {
        timer = setTimeout(() => r(undefined), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves when every promise in `set` settled or after `ms`, whichever is first. */
export async function settleWithin(set: ReadonlySet<Promise<unknown>>, ms: number): Promise<void> {
  if (set.size === 0) return;
  await within(Promise.allSettled([...set]), ms);
}
