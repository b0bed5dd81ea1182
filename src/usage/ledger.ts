/**
 * Budget accounting (API.md §8.4): spend per budget scope and period, settled and reserved. A turn
 * is admitted by reserving a hold (its first model call's expected cost); before each model call
 * the run reserves that call's expected cost (the first call takes the turn's hold over) and
 * settles the real cost after (zero when the call failed); a turn that ends without its first call
 * having taken its hold over releases it. A reservation is admitted while settled + reserved is
 * under every limit it names, checked and added in one atomic step, so parallel runs at a limit
 * overspend by at most one call (as long as a call costs at most what it reserved:
 * docs/budgets.md says how the expected cost is chosen).
 *
 * Two drivers with this contract: MemoryLedger (here; the local queue, one process runs every turn)
 * and RedisLedger (redis-ledger.ts; bullmq, every gateway and worker shares the accounts).
 */

export type BudgetPeriod = "day" | "month";

/** A budget scope: `global`, `agent:<id>`, `session:<key>` or `channel:<name>`. */
export type BudgetScope = string;

export interface BudgetLimit {
  scope: BudgetScope;
  period: BudgetPeriod;
  /** USD; null: no cost limit (the account is kept, e.g. for a `warn` budget, and never refuses). */
  maxCostUsd: number | null;
  /** input + output tokens; null: no token limit. */
  maxTokens: number | null;
}

export interface Spend {
  costUsd: number;
  tokens: number;
}

export const NO_SPEND: Readonly<Spend> = Object.freeze({ costUsd: 0, tokens: 0 });

/** The last key computed per period and the UTC span it holds for (a turn asks ~10 times). */
const lastKey: Record<BudgetPeriod, { from: number; to: number; key: string }> = {
  day: { from: 0, to: 0, key: "" },
  month: { from: 0, to: 0, key: "" },
};

/** The period a time falls in, as a key: `day:2026-12-06`, `month:2026-12` (UTC). */
export function periodKey(period: BudgetPeriod, at: number): string {
  const last = lastKey[period];
  if (at >= last.from && at < last.to) return last.key;
  const iso = new Date(at).toISOString();
  const key = period === "day" ? `day:${iso.slice(0, 10)}` : `month:${iso.slice(0, 7)}`;
  lastKey[period] = { from: periodStart(period, at), to: periodEnd(period, at), key };
  return key;
}

/** When the period containing `at` began (UTC), ms. */
export function periodStart(period: BudgetPeriod, at: number): number {
  const d = new Date(at);
  return period === "day"
    ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())
    : Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** When the period containing `at` ends (UTC), ms. */
export function periodEnd(period: BudgetPeriod, at: number): number {
  const d = new Date(at);
  return period === "day"
    ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
    : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

export interface ReserveOptions {
  /** The reservation's id; reserving an id again replaces what it held. */
  id: string;
  /** An unsettled reservation lapses after this long (its process died, its run never started). */
  ttlMs: number;
  /**
   * Holds this reservation takes over (a turn's first model call takes the turn's hold): while any
   * of them is still held, the call is admitted without the limit check, since the turn was
   * admitted for it; they are released either way.
   */
  takesOver?: readonly string[];
}

/** What a settle needs: the id, when it was reserved (its period) and the limits it reserved on. */
export interface Reservation {
  id: string;
  at: number;
  limits: readonly BudgetLimit[];
}

export type Admission =
  | { ok: true; reservation: Reservation }
  | { ok: false; limit: BudgetLimit; spent: Spend };

type Awaitable<T> = T | Promise<T>;

/** The accounts, in this process (MemoryLedger) or in Redis (RedisLedger). */
export interface Ledger {
  /**
   * Admits a model call (or a turn's hold) under every limit and reserves `expected` on each of
   * their accounts, or refuses naming the first limit reached (settled + reserved ≥ its max).
   */
  reserve(limits: readonly BudgetLimit[], expected: Spend, opts: ReserveOptions): Awaitable<Admission>;
  /** Replaces a reservation by the real spend (zero: the call failed); each limit's settled spend after. */
  settle(r: Reservation, actual: Spend): Awaitable<Spend[]>;
  /**
   * Gives back what these reservations still hold (a turn's holds when it ended without its first
   * call taking them over), in the period they were reserved in, even when that has ended since;
   * ids no longer held (taken over, released, lapsed) are skipped. How many were still held.
   */
  release(ids: readonly string[]): Awaitable<number>;
  /** Settled and reserved spend of a scope in the period containing now. */
  spent(scope: BudgetScope, period: BudgetPeriod): Awaitable<{ settled: Spend; reserved: Spend }>;
  /** true for the first claim of `key` in the period containing now (a `warnAt` notice: once per period). */
  claimOnce(period: BudgetPeriod, key: string): Awaitable<boolean>;
}

interface Account {
  settled: Spend;
  reserved: Spend;
}

interface Held {
  accounts: Account[];
  spend: Spend;
  expiresAt: number;
}

/**
 * In-memory accounts: one map per period key (`day:…`, `month:…`), those of ended periods dropped
 * when a new period starts. Everything is synchronous, so each admission and reservation is atomic.
 */
export class MemoryLedger implements Ledger {
  /** period key → scope → account */
  readonly #periods = new Map<string, Map<BudgetScope, Account>>();
  readonly #held = new Map<string, Held>();
  readonly #claimed = new Map<string, Set<string>>();
  /** The earliest expiry among the held reservations (Infinity: none). */
  #nextExpiry = Number.POSITIVE_INFINITY;

  constructor(private readonly now: () => number = Date.now) {}

  #account(period: BudgetPeriod, scope: BudgetScope, at: number): Account {
    const pk = periodKey(period, at);
    let accounts = this.#periods.get(pk);
    if (accounts === undefined) {
      // a new period: the ended ones of the same kind go (at most a day's and a month's are kept)
      for (const k of this.#periods.keys()) if (k.startsWith(period) && k !== pk) this.#periods.delete(k);
      for (const k of this.#claimed.keys()) if (k.startsWith(period) && k !== pk) this.#claimed.delete(k);
      accounts = new Map();
      this.#periods.set(pk, accounts);
    }
    let a = accounts.get(scope);
    if (a === undefined) {
      a = { settled: { costUsd: 0, tokens: 0 }, reserved: { costUsd: 0, tokens: 0 } };
      accounts.set(scope, a);
    }
    return a;
  }

  /** Gives a held reservation back to its accounts; true when it was still held. */
  #release(id: string): boolean {
    const h = this.#held.get(id);
    if (h === undefined) return false;
    this.#held.delete(id);
    for (const a of h.accounts) {
      a.reserved.costUsd = Math.max(0, a.reserved.costUsd - h.spend.costUsd);
      a.reserved.tokens = Math.max(0, a.reserved.tokens - h.spend.tokens);
    }
    return true;
  }

  /** Lapsed reservations go back (only when one may have lapsed: the earliest expiry is known). */
  #sweep(at: number): void {
    if (at < this.#nextExpiry) return;
    let next = Number.POSITIVE_INFINITY;
    for (const [id, h] of this.#held) {
      if (h.expiresAt <= at) this.#release(id);
      else if (h.expiresAt < next) next = h.expiresAt;
    }
    this.#nextExpiry = next;
  }

  reserve(limits: readonly BudgetLimit[], expected: Spend, opts: ReserveOptions): Admission {
    const at = this.now();
    this.#sweep(at);
    let tookOver = false;
    for (const hold of opts.takesOver ?? []) if (this.#release(hold)) tookOver = true;
    this.#release(opts.id);
    const accounts: Account[] = [];
    for (const limit of limits) {
      const a = this.#account(limit.period, limit.scope, at);
      const cost = a.settled.costUsd + a.reserved.costUsd;
      const tokens = a.settled.tokens + a.reserved.tokens;
      if (
        !tookOver &&
        ((limit.maxCostUsd !== null && cost >= limit.maxCostUsd) ||
          (limit.maxTokens !== null && tokens >= limit.maxTokens))
      )
        return { ok: false, limit, spent: { costUsd: cost, tokens } };
      accounts.push(a);
    }
    for (const a of accounts) {
      a.reserved.costUsd += expected.costUsd;
      a.reserved.tokens += expected.tokens;
    }
    const expiresAt = at + opts.ttlMs;
    this.#held.set(opts.id, { accounts, spend: { ...expected }, expiresAt });
    if (expiresAt < this.#nextExpiry) this.#nextExpiry = expiresAt;
    return { ok: true, reservation: { id: opts.id, at, limits } };
  }

  settle(r: Reservation, actual: Spend): Spend[] {
    this.#release(r.id);
    return r.limits.map((l) => {
      const a = this.#account(l.period, l.scope, r.at);
      a.settled.costUsd += actual.costUsd;
      a.settled.tokens += actual.tokens;
      return { ...a.settled };
    });
  }

  /** A held reservation keeps its accounts (those of the period it was reserved in): found by id alone. */
  release(ids: readonly string[]): number {
    let n = 0;
    for (const id of ids) if (this.#release(id)) n++;
    return n;
  }

  /**
   * Sets a scope's settled spend in the period containing now to what was counted before this
   * process started (the usage counts survive a restart; these accounts would start from zero).
   */
  seed(scope: BudgetScope, period: BudgetPeriod, settled: Spend): void {
    const a = this.#account(period, scope, this.now());
    a.settled.costUsd = Math.max(a.settled.costUsd, settled.costUsd);
    a.settled.tokens = Math.max(a.settled.tokens, settled.tokens);
  }

  spent(scope: BudgetScope, period: BudgetPeriod): { settled: Spend; reserved: Spend } {
    const a = this.#periods.get(periodKey(period, this.now()))?.get(scope);
    return a
      ? { settled: { ...a.settled }, reserved: { ...a.reserved } }
      : { settled: { ...NO_SPEND }, reserved: { ...NO_SPEND } };
  }

  claimOnce(period: BudgetPeriod, key: string): boolean {
    const pk = periodKey(period, this.now());
    let seen = this.#claimed.get(pk);
    if (seen === undefined) {
      seen = new Set();
      this.#claimed.set(pk, seen);
    }
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  }
}
