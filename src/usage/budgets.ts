import type { Config } from "../config/schema.js";
import { SwitchboardError } from "../errors.js";
import type { UsageBudgets, UsageContext } from "../services/index.js";
import { addSpend, type BudgetLimit, MemoryLedger, periodEnd } from "./ledger.js";

/**
 * `usage.budgets` (API.md §8.4) over the in-process ledger: a turn is admitted while every `block`
 * budget whose scope matches it is under its limit (else BUDGET_EXCEEDED naming the budget and
 * when it resets), and its real cost is added when it ends. Scope match: `global`, `agent:<id>`,
 * `session:<key>`, `channel:<name>`.
 */
export class Budgets implements UsageBudgets {
  readonly #ledger: MemoryLedger;

  constructor(
    private readonly budgets: Config["usage"]["budgets"],
    private readonly now: () => number = Date.now,
  ) {
    this.#ledger = new MemoryLedger(now);
  }

  #matching(ctx: UsageContext): Array<BudgetLimit & { index: number; action: "block" | "warn" }> {
    const out: Array<BudgetLimit & { index: number; action: "block" | "warn" }> = [];
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
        });
    });
    return out;
  }

  admit(ctx: UsageContext): void {
    const block = this.#matching(ctx).filter((l) => l.action === "block");
    if (block.length === 0) return;
    const a = this.#ledger.reserve(block, { costUsd: 0, tokens: 0 });
    if (a.ok) {
      this.#ledger.settle(a.reservation, { costUsd: 0, tokens: 0 });
      return;
    }
    const { limit, spent } = a;
    const resetsAt = periodEnd(limit.period, this.now());
    const what =
      limit.maxCostUsd !== null && spent.costUsd >= limit.maxCostUsd
        ? `$${spent.costUsd.toFixed(4)} of $${limit.maxCostUsd}`
        : `${spent.tokens} of ${limit.maxTokens} tokens`;
    throw new SwitchboardError(
      "BUDGET_EXCEEDED",
      `budget ${limit.scope} per ${limit.period} is spent (${what}); it resets at ${new Date(resetsAt).toISOString()}`,
      { details: { scope: limit.scope, period: limit.period, resetsAt, spent } },
    );
  }

  record(ctx: UsageContext, usage: { cost?: number; input: number; output: number }): void {
    const limits = this.#matching(ctx);
    if (limits.length === 0) return;
    addSpend(this.#ledger, limits, { costUsd: usage.cost ?? 0, tokens: usage.input + usage.output });
  }
}
