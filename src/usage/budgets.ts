import type { Config } from "../config/schema.js";
import { SwitchboardError } from "../errors.js";
import type { UsageBudgets, UsageContext } from "../services/index.js";
import {
  type DailyUsageRow,
  UsageCounter,
  type UsageCounts,
  type UsageDimension,
  type UsageRow,
  type UsageTotals,
} from "./counter.js";
import {
  addSpend,
  type BudgetLimit,
  type BudgetPeriod,
  MemoryLedger,
  periodEnd,
  periodKey,
} from "./ledger.js";

type BudgetConfig = Config["usage"]["budgets"][number];

/** A `warnAt` notice: to the chat of `sessionKey` and to the owners, once per budget and period (`key`). */
export interface BudgetNotice {
  sessionKey: string;
  text: string;
  key: string;
}

export interface BudgetsOptions {
  now?: () => number;
  /** false: turns are counted (usage.get/list) but never refused (a queue driver the ledger does not cover). */
  enforce?: boolean;
  /** Where `warnAt` notices go (the app sends them to the chat and the owners). */
  notify?: (n: BudgetNotice) => void;
  /** The usage counts (usage.get / usage.list): default in this process's memory only. */
  counter?: UsageCounts;
}

function fmtSpent(limit: BudgetLimit, spent: { costUsd: number; tokens: number }): string {
  return limit.maxCostUsd !== null && (limit.maxTokens === null || spent.costUsd >= limit.maxCostUsd)
    ? `$${spent.costUsd.toFixed(4)} of $${limit.maxCostUsd}`
    : `${spent.tokens} of ${limit.maxTokens} tokens`;
}

/**
 * `usage.budgets` (API.md §8.4) over the in-process ledger: a turn is admitted while every `block`
 * budget whose scope matches it is under its limit (else BUDGET_EXCEEDED naming the budget and
 * when it resets), and its real cost is added when it ends. Scope match: `global`, `agent:<id>`,
 * `session:<key>`, `channel:<name>`. Every finished turn is also counted per agent, session,
 * channel and model for the current day and month (`usage.get` / `usage.list`), budgets or not.
 */
export class Budgets implements UsageBudgets {
  readonly #ledger: MemoryLedger;
  readonly #counter: UsageCounts;
  readonly #now: () => number;
  readonly #enforce: boolean;
  readonly #notify: ((n: BudgetNotice) => void) | undefined;
  /** `<budget index>|<period key>` already warned in this process. */
  readonly #warned = new Set<string>();

  constructor(
    private readonly budgets: Config["usage"]["budgets"],
    opts: BudgetsOptions = {},
  ) {
    this.#now = opts.now ?? Date.now;
    this.#enforce = opts.enforce ?? true;
    this.#notify = opts.notify;
    this.#ledger = new MemoryLedger(this.#now);
    this.#counter = opts.counter ?? new UsageCounter({ now: this.#now });
  }

  #matching(
    ctx: UsageContext,
  ): Array<BudgetLimit & { index: number; action: "block" | "warn"; warnAt: number }> {
    const out: Array<BudgetLimit & { index: number; action: "block" | "warn"; warnAt: number }> = [];
    this.budgets.forEach((b, index) => {
      const s = b.scope;
      const hit =
        s === "global" ||
        s === `agent:${ctx.agentId}` ||
        s === `session:${ctx.sessionKey}` ||
        (ctx.channel !== undefined && s === `channel:${ctx.channel}`);
      if (hit)
        out.push({
          scope: s,
          period: b.period,
          maxCostUsd: b.maxCostUsd,
          maxTokens: b.maxTokens,
          index,
          action: b.action,
          warnAt: b.warnAt,
        });
    });
    return out;
  }

  /** The BUDGET_EXCEEDED error for a spent `block` budget matching the turn, or null. */
  check(ctx: UsageContext): SwitchboardError | null {
    if (!this.#enforce) return null;
    const block = this.#matching(ctx).filter((l) => l.action === "block");
    if (block.length === 0) return null;
    const a = this.#ledger.reserve(block, { costUsd: 0, tokens: 0 });
    if (a.ok) {
      this.#ledger.settle(a.reservation, { costUsd: 0, tokens: 0 });
      return null;
    }
    const { limit, spent } = a;
    const resetsAt = periodEnd(limit.period, this.#now());
    return new SwitchboardError(
      "BUDGET_EXCEEDED",
      `budget ${limit.scope} per ${limit.period} is spent (${fmtSpent(limit, spent)}); it resets at ${new Date(resetsAt).toISOString()}`,
      { details: { scope: limit.scope, period: limit.period, resetsAt, spent } },
    );
  }

  admit(ctx: UsageContext): void {
    const refused = this.check(ctx);
    if (refused) throw refused;
  }

  record(ctx: UsageContext, usage: { cost?: number; input: number; output: number }): void {
    const costUsd = usage.cost ?? 0;
    this.#counter.add({
      agentId: ctx.agentId,
      sessionKey: ctx.sessionKey,
      ...(ctx.channel ? { channel: ctx.channel } : {}),
      ...(ctx.model ? { model: ctx.model } : {}),
      costUsd,
      input: usage.input,
      output: usage.output,
    });
    const limits = this.#matching(ctx);
    if (limits.length === 0) return;
    addSpend(this.#ledger, limits, { costUsd, tokens: usage.input + usage.output });
    for (const l of limits) this.#maybeWarn(ctx, l);
  }

  /** One notice per budget and period once its spend reaches `warnAt` of a limit. */
  #maybeWarn(ctx: UsageContext, l: BudgetLimit & { index: number; warnAt: number }): void {
    if (this.#notify === undefined) return;
    const now = this.#now();
    const pk = periodKey(l.period, now);
    const seen = `${l.index}|${pk}`;
    if (this.#warned.has(seen)) return;
    const spent = this.#ledger.spent(l.scope, l.period);
    const reached =
      (l.maxCostUsd !== null && spent.costUsd >= l.warnAt * l.maxCostUsd) ||
      (l.maxTokens !== null && spent.tokens >= l.warnAt * l.maxTokens);
    if (!reached) return;
    if (this.#warned.size > 1000) this.#warned.clear();
    this.#warned.add(seen);
    const text =
      `Budget ${l.scope} per ${l.period} has reached ${Math.round(l.warnAt * 100)}% ` +
      `(${fmtSpent(l, spent)}); it resets at ${new Date(periodEnd(l.period, now)).toISOString()}.`;
    this.#notify({ sessionKey: ctx.sessionKey, text, key: `budget-warn:${l.index}:${l.scope}:${pk}` });
  }

  /** `usage.get`: a scope's totals this period, with the budget configured for exactly that scope and period. */
  async get(
    scope: string,
    period: BudgetPeriod,
  ): Promise<
    UsageTotals & {
      budget?: BudgetConfig & { resetsAt: string; spent: { costUsd: number; tokens: number } };
    }
  > {
    const totals = await this.#counter.get(scope, period);
    const b = this.budgets.find((x) => x.scope === scope && x.period === period);
    if (b === undefined) return totals;
    return {
      ...totals,
      budget: {
        ...b,
        resetsAt: new Date(periodEnd(period, this.#now())).toISOString(),
        spent: this.#ledger.spent(scope, period),
      },
    };
  }

  /** `usage.list`: one row per agent / session / channel / model this period, costliest first. */
  list(period: BudgetPeriod, by: UsageDimension): Promise<UsageRow[]> {
    return this.#counter.list(period, by);
  }

  /** `usage.list { days }`: rows per UTC day for the last `days` days, and the configured budgets. */
  async daily(by: UsageDimension, days: number): Promise<{ rows: DailyUsageRow[]; budgets: BudgetConfig[] }> {
    return { rows: await this.#counter.daily(by, days), budgets: this.budgets.map((b) => ({ ...b })) };
  }
}
