/**
 * Budget accounting (API.md §8.4), the in-process driver: spend per budget scope and period,
 * settled and reserved. A run reserves the expected cost of a model call before it makes it and
 * settles the real cost after; a call is admitted while settled + reserved is under the limit.
 * Everything here is synchronous, so in one process each admission and reservation is atomic:
 * with N calls racing at the limit, at most the calls admitted before the limit was reached are
 * in flight, and the overspend is at most one call's cost per concurrent admission window
 * (`ledger.test.ts` shows 20 parallel runs at the limit overspending by at most one call).
 *
 * Not yet wired into turns (issue 49 part B): the Redis driver (one Lua script through
 * src/redis/scripts.ts), `usage.budgets` config, chat.send's BUDGET_EXCEEDED and usage.get/list
 * build on this contract.
 */

export type BudgetPeriod = "day" | "month";

/** A budget scope: `global`, `agent:<id>`, `session:<key>` or `channel:<name>`. */
export type BudgetScope = string;

export interface BudgetLimit {
  scope: BudgetScope;
  period: BudgetPeriod;
  /** USD; null: no cost limit. */
  maxCostUsd: number | null;
  /** input + output tokens; null: no token limit. */
  maxTokens: number | null;
}

export interface Spend {
  costUsd: number;
  tokens: number;
}

/** The period a time falls in, as a key: `day:2026-12-06`, `month:2026-12` (UTC). */
export function periodKey(period: BudgetPeriod, at: number): string {
  const iso = new Date(at).toISOString();
  return period === "day" ? `day:${iso.slice(0, 10)}` : `month:${iso.slice(0, 7)}`;
}

/** When the period containing `at` ends (UTC), ms. */
export function periodEnd(period: BudgetPeriod, at: number): number {
  const d = new Date(at);
  return period === "day"
    ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
    : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

interface Account {
  settled: Spend;
  reserved: Spend;
}

export type Admission = { ok: true; reservation: string } | { ok: false; limit: BudgetLimit; spent: Spend };

/** In-memory accounts, keyed `<scope>|<periodKey>`. */
export class MemoryLedger {
  readonly #accounts = new Map<string, Account>();
  readonly #reservations = new Map<string, { keys: string[]; spend: Spend }>();
  #seq = 0;

  constructor(private readonly now: () => number = Date.now) {}

  #account(key: string): Account {
    let a = this.#accounts.get(key);
    if (a === undefined) {
      a = { settled: { costUsd: 0, tokens: 0 }, reserved: { costUsd: 0, tokens: 0 } };
      this.#accounts.set(key, a);
    }
    return a;
  }

  /**
   * Admits a model call under every limit that applies and reserves `expected` on each of their
   * accounts, or refuses naming the first limit reached. Atomic (synchronous).
   */
  reserve(limits: readonly BudgetLimit[], expected: Spend): Admission {
    const at = this.now();
    const keys: string[] = [];
    for (const limit of limits) {
      const key = `${limit.scope}|${periodKey(limit.period, at)}`;
      const a = this.#account(key);
      const cost = a.settled.costUsd + a.reserved.costUsd;
      const tokens = a.settled.tokens + a.reserved.tokens;
      if (
        (limit.maxCostUsd !== null && cost >= limit.maxCostUsd) ||
        (limit.maxTokens !== null && tokens >= limit.maxTokens)
      )
        return { ok: false, limit, spent: { costUsd: cost, tokens } };
      keys.push(key);
    }
    for (const key of keys) {
      const a = this.#account(key);
      a.reserved.costUsd += expected.costUsd;
      a.reserved.tokens += expected.tokens;
    }
    const reservation = `r${++this.#seq}`;
    this.#reservations.set(reservation, { keys, spend: { ...expected } });
    return { ok: true, reservation };
  }

  /** Replaces a reservation by the real spend (0 when the call failed). Unknown ids: a no-op. */
  settle(reservation: string, actual: Spend): void {
    const r = this.#reservations.get(reservation);
    if (r === undefined) return;
    this.#reservations.delete(reservation);
    for (const key of r.keys) {
      const a = this.#account(key);
      a.reserved.costUsd = Math.max(0, a.reserved.costUsd - r.spend.costUsd);
      a.reserved.tokens = Math.max(0, a.reserved.tokens - r.spend.tokens);
      a.settled.costUsd += actual.costUsd;
      a.settled.tokens += actual.tokens;
    }
  }

  /** Adds `spend` to the settled account of `limit` in the period containing now. */
  settleInto(limit: BudgetLimit, spend: Spend): void {
    const a = this.#account(`${limit.scope}|${periodKey(limit.period, this.now())}`);
    a.settled.costUsd += spend.costUsd;
    a.settled.tokens += spend.tokens;
  }

  /** Settled spend of a scope in the period containing now. */
  spent(scope: BudgetScope, period: BudgetPeriod): Spend {
    const a = this.#accounts.get(`${scope}|${periodKey(period, this.now())}`);
    return a ? { ...a.settled } : { costUsd: 0, tokens: 0 };
  }
}

/** Adds spend straight to the settled accounts of `limits` (a turn's real cost, no reservation). */
export function addSpend(ledger: MemoryLedger, limits: readonly BudgetLimit[], spend: Spend): void {
  for (const limit of limits) ledger.settleInto(limit, spend);
}
