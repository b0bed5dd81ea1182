import type { Redis } from "ioredis";
import { SwitchboardError } from "../../errors.js";
import { BoundedMap } from "../../ordered-set.js";

/** How often a read-modify-write is retried after losing a revision race to another process. */
export const MAX_CAS_ATTEMPTS = 64;

/**
 * Optimistic concurrency loop: `attempt` reads, computes and writes only if the record is
 * still at the revision it read; it returns `retry` when it lost that race. Between attempts
 * it waits a short, growing, jittered delay so two processes do not keep colliding.
 */
export async function withCasRetry<T>(what: string, attempt: () => Promise<CasResult<T>>): Promise<T> {
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

export type CasResult<T> = { retry: true } | { retry: false; value: T };

/**
 * The `rev` of a guessed record (see `KnownRevisions.attempt`): its revision is unknown, so a
 * write against it compares the stored JSON instead.
 */
export const GUESSED = "guess";

/** A stored record's JSON (null: none) and revision ("0": none; `GUESSED`: not read, guessed). */
export interface Revision {
  data: string | null;
  rev: string;
}

/**
 * The JSON and revision of the records this process last read or wrote (the newest `max`), so a
 * read-modify-write tries first without reading: the revision check refuses that write when
 * another process wrote since, and the attempt then reads and tries again at once. Sound because
 * revisions never repeat, not even for a record deleted or expired and written again (putSession-6
 * and putRun-2 start a new record's revisions at the server's clock in µs).
 */
export class KnownRevisions {
  private readonly known: BoundedMap<string, { data: string; rev: string }>;

  constructor(max: number) {
    this.known = new BoundedMap(max);
  }

  /** HMGET `data` and `rev` of `hash` (the record `id`), remembered. */
  async read(client: Redis, hash: string, id: string): Promise<Revision> {
    const [data, rev] = await client.hmget(hash, "data", "rev");
    const read = { data: data ?? null, rev: rev ?? "0" };
    if (read.data === null) this.known.delete(id);
    else this.known.set(id, { data: read.data, rev: read.rev });
    return read;
  }

  /** Remembers a write's outcome (`rev` -1: refused, nothing is known); true when it was written. */
  wrote(id: string, data: string, rev: unknown): boolean {
    if (rev === -1) {
      this.known.delete(id);
      return false;
    }
    this.known.set(id, { data, rev: String(rev) });
    return true;
  }

  forget(id: string): void {
    this.known.delete(id);
  }

  /**
   * One attempt of a read-modify-write `from`: against the known revision first, else against
   * the caller's `guess` (a record this process never saw, as the caller expects it), else (or
   * when refused) a fresh read.
   */
  async attempt<T>(
    id: string,
    read: () => Promise<Revision>,
    from: (r: Revision) => Promise<CasResult<T>>,
    guess?: Revision,
  ): Promise<CasResult<T>> {
    const known = this.known.get(id) ?? guess;
    const first = known ? await from(known) : RETRY;
    return first.retry ? from(await read()) : first;
  }
}
