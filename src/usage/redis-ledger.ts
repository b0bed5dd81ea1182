import type { Redis } from "ioredis";
import { budgetReserve, budgetSettle } from "../redis/commands/budgetReserve-2.js";
import { ScriptRunner } from "../redis/scripts.js";
import { type BudgetLimit, type BudgetPeriod, periodEnd, periodKey, type Spend } from "./ledger.js";

/** A reservation on the Redis ledger: what to give back when the call settles. */
export interface RedisReservation {
  at: number;
  limits: Array<{ scope: string; period: BudgetPeriod }>;
  spend: Spend;
}

export type RedisAdmission =
  | { ok: true; reservation: RedisReservation }
  | { ok: false; limit: BudgetLimit; spent: Spend };

/** Accounts outlive their period by a day (then Redis drops them). */
const GRACE_MS = 86_400_000;

/**
 * The budget ledger in Redis (API.md §8.4), for processes sharing one queue (bullmq): the same
 * contract as MemoryLedger, each admission-and-reservation one Lua script (budgetReserve-2)
 * through the project's script runner, so parallel admissions at a limit from any number of
 * processes overspend by at most one call. Accounts are two hashes per period under `prefix`:
 * `<prefix>budget:day:<yyyy-mm-dd>` and `<prefix>budget:month:<yyyy-mm>`.
 */
export class RedisLedger {
  readonly #scripts: ScriptRunner;

  constructor(
    private readonly client: Redis,
    private readonly prefix: string,
    private readonly now: () => number = Date.now,
  ) {
    this.#scripts = new ScriptRunner(client, "budget ledger");
  }

  #keys(at: number): [string, string] {
    return [`${this.prefix}budget:${periodKey("day", at)}`, `${this.prefix}budget:${periodKey("month", at)}`];
  }

  #ttls(at: number): [number, number] {
    return [periodEnd("day", at) - at + GRACE_MS, periodEnd("month", at) - at + GRACE_MS];
  }

  async reserve(limits: readonly BudgetLimit[], expected: Spend): Promise<RedisAdmission> {
    const at = this.now();
    const args: Array<string | number> = [
      limits.length,
      expected.costUsd,
      expected.tokens,
      ...this.#ttls(at),
    ];
    for (const l of limits)
      args.push(l.period === "day" ? 1 : 2, l.scope, l.maxCostUsd ?? "", l.maxTokens ?? "");
    const res = (await this.#scripts.run(budgetReserve, this.#keys(at), args)) as Array<number | string>;
    if (Number(res[0]) === 1)
      return {
        ok: true,
        reservation: {
          at,
          limits: limits.map((l) => ({ scope: l.scope, period: l.period })),
          spend: { ...expected },
        },
      };
    const limit = limits[Number(res[1]) - 1] as BudgetLimit;
    return { ok: false, limit, spent: { costUsd: Number(res[2]), tokens: Number(res[3]) } };
  }

  /** Replaces a reservation by the real spend (in the period it was made in). */
  async settle(r: RedisReservation, actual: Spend): Promise<void> {
    const args: Array<string | number> = [
      r.limits.length,
      r.spend.costUsd,
      r.spend.tokens,
      actual.costUsd,
      actual.tokens,
      ...this.#ttls(r.at),
    ];
    for (const l of r.limits) args.push(l.period === "day" ? 1 : 2, l.scope);
    await this.#scripts.run(budgetSettle, this.#keys(r.at), args);
  }

  /** Settled and reserved spend of a scope in the period containing now. */
  async spent(scope: string, period: BudgetPeriod): Promise<{ settled: Spend; reserved: Spend }> {
    const [day, month] = this.#keys(this.now());
    const v = await this.client.hmget(
      period === "day" ? day : month,
      `${scope}|c`,
      `${scope}|t`,
      `${scope}|rc`,
      `${scope}|rt`,
    );
    const n = (i: number) => Number(v[i] ?? 0);
    return { settled: { costUsd: n(0), tokens: n(1) }, reserved: { costUsd: n(2), tokens: n(3) } };
  }
}
