import { SwitchboardError } from "../../errors.js";

/** How often a read-modify-write is retried after losing a revision race to another process. */
export const MAX_CAS_ATTEMPTS = 64;

/**
 * Optimistic concurrency loop: `attempt` reads, computes and writes only if the record is
 * still at the revision it read; it returns `retry` when it lost that race. Between attempts
 * it waits a short, growing, jittered delay so two processes do not keep colliding.
 */
export async function withCasRetry<T>(
  what: string,
  attempt: () => Promise<{ retry: true } | { retry: false; value: T }>,
): Promise<T> {
  for (let i = 0; i < MAX_CAS_ATTEMPTS; i++) {
    const r = await attempt();
    if (!r.retry) return r.value;
    const capMs = Math.min(50, 2 ** Math.min(i, 6));
    await new Promise((resolve) => setTimeout(resolve, Math.random() * capMs));
  }
  throw new SwitchboardError(
    "CONFLICT",
    `redis store: ${what} kept losing to concurrent writers after ${MAX_CAS_ATTEMPTS} attempts; retry later`,
  );
}

export const RETRY = { retry: true } as const;
