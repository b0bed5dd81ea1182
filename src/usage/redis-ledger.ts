import type { Redis } from "ioredis";
import { budgetRelease, budgetReserve, budgetSettle } from "../redis/commands/budgetReserve-4.js";
import { ScriptRunner } from "../redis/scripts.js";
import {
  type Admission,
  type BudgetLimit,
  type BudgetPeriod,
  type Ledger,
  periodEnd,
  periodKey,
  periodStart,
  type Reservation,
  type ReserveOptions,
  type Spend,
} from "./ledger.js";

/** Accounts outlive their period by a day (then Redis drops them). */
const GRACE_MS = 86_400_000;

/**
 * The budget ledger in Redis (API.md §8.4), for processes sharing one queue (bullmq): the same
 * contract as MemoryLedger, each admission-and-reservation one Lua script (budgetReserve-4), each
 * settle another (budgetSettle-4) and each release of holds a third (budgetRelease-8), through the
 * project's script runner, so parallel admissions at a limit from any number of gateways and
 * workers overspend by at most one call.
 * Accounts are a hash per period under `prefix` (`<prefix>budget:day:<yyyy-mm-dd>`,
 * `<prefix>budget:month:<yyyy-mm>`), each with a sorted set of its held reservations by expiry
 * (`…:held`), so a reservation whose process died lapses instead of holding budget all period.
 */
export class RedisLedger implements Ledger {
  readonly #scripts: ScriptRunner;

  constructor(
    private readonly client: Redis,
    private readonly prefix: string,
    private readonly now: () => number = Date.now,
  ) {
    this.#scripts = new ScriptRunner(client, "budget ledger");
  }

  #hash(period: BudgetPeriod, at: number): string {
    return `${this.prefix}budget:${periodKey(period, at)}`;
  }

  #keys(at: number): string[] {
    const day = this.#hash("day", at);
    const month = this.#hash("month", at);
    return [day, month, `${day}:held`, `${month}:held`];
  }

  #ttls(at: number): [number, number] {
    return [periodEnd("day", at) - at + GRACE_MS, periodEnd("month", at) - at + GRACE_MS];
  }

  async reserve(limits: readonly BudgetLimit[], expected: Spend, opts: ReserveOptions): Promise<Admission> {
    const at = this.now();
    const holds = opts.takesOver ?? [];
    const args: Array<string | number> = [
      at,
      opts.id,
      at + opts.ttlMs,
      expected.costUsd,
      expected.tokens,
      ...this.#ttls(at),
      holds.length,
      ...holds,
      limits.length,
    ];
    for (const l of limits)
      args.push(l.period === "day" ? 1 : 2, l.scope, l.maxCostUsd ?? "", l.maxTokens ?? "");
    const res = (await this.#scripts.run(budgetReserve, this.#keys(at), args)) as Array<number | string>;
    if (Number(res[0]) === 1) return { ok: true, reservation: { id: opts.id, at, limits } };
    const limit = limits[Number(res[1]) - 1] as BudgetLimit;
    return { ok: false, limit, spent: { costUsd: Number(res[2]), tokens: Number(res[3]) } };
  }

  async settle(r: Reservation, actual: Spend): Promise<Spend[]> {
    const args: Array<string | number> = [
      r.id,
      actual.costUsd,
      actual.tokens,
      ...this.#ttls(r.at),
      r.limits.length,
    ];
    for (const l of r.limits) args.push(l.period === "day" ? 1 : 2, l.scope);
    const res = (await this.#scripts.run(budgetSettle, this.#keys(r.at), args)) as string[];
    return r.limits.map((_, i) => ({ costUsd: Number(res[2 * i]), tokens: Number(res[2 * i + 1]) }));
  }

  async release(ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const at = this.now();
    // the day and the month before: a hold reserved before a UTC midnight or month end is there.
    // Only those: a hold admitted by a process whose clock is ahead, already past midnight, while
    // this one's is still on the day before, is in an account not looked at here; it lapses
    // (HOLD_TTL_MS, 10 min).
    const before = (period: BudgetPeriod) => this.#hash(period, periodStart(period, at) - 1);
    const day = before("day");
    const month = before("month");
    const keys = [...this.#keys(at), day, month, `${day}:held`, `${month}:held`];
    return Number(await this.#scripts.run(budgetRelease, keys, [...ids]));
  }

  async spent(scope: string, period: BudgetPeriod): Promise<{ settled: Spend; reserved: Spend }> {
    const v = await this.client.hmget(
      this.#hash(period, this.now()),
      `${scope}|c`,
      `${scope}|t`,
      `${scope}|rc`,
      `${scope}|rt`,
    );
    const n = (i: number) => Number(v[i] ?? 0);
    return { settled: { costUsd: n(0), tokens: n(1) }, reserved: { costUsd: n(2), tokens: n(3) } };
  }

  async claimOnce(period: BudgetPeriod, key: string): Promise<boolean> {
    const at = this.now();
    const hash = this.#hash(period, at);
    const res = await this.client
      .multi()
      .hsetnx(hash, `w|${key}`, "1")
      .pexpire(hash, this.#ttls(at)[period === "day" ? 0 : 1])
      .exec();
    return Number(res?.[0]?.[1]) === 1;
  }
}
