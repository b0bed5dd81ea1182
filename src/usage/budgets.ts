import type { Config } from "../config/schema.js";
import type { UsageBudgets, UsageCall, UsageContext, UsageTicket } from "../services/index.js";
import type { SessionEntry } from "../store/types.js";
import { BudgetGate, type BudgetNotice, type CallCosts } from "./admission.js";
import {
  type DailyUsageRow,
  UsageCounter,
  type UsageCounts,
  type UsageDimension,
  type UsageRow,
  type UsageTotals,
} from "./counter.js";
import { type BudgetPeriod, type Ledger, MemoryLedger, periodEnd, type Spend } from "./ledger.js";

export type { BudgetNotice };

type BudgetConfig = Config["usage"]["budgets"][number];

export interface BudgetsOptions {
  now?: () => number;
  /** The accounts: in this process (default) or in Redis (bullmq: every gateway and worker shares them). */
  ledger?: Ledger;
  /** Prices and output caps (expected call cost), and each session's failover chain. */
  models?: Partial<CallCosts> & {
    chainFor?(agentId: string, entry?: SessionEntry | null): readonly string[];
  };
  /** Where `warnAt` notices go (the app sends them to the chat and the owners). */
  notify?: (n: BudgetNotice) => void;
  /** The usage counts (usage.get / usage.list): default in this process's memory only. */
  counter?: UsageCounts;
}

/**
 * `usage.budgets` (API.md §8.4): admission of new turns and a reservation around every model call
 * (admission.ts, over the ledger), and the counts of finished turns (and of compactions' calls)
 * per agent, session, channel and model for the current day and month (`usage.get` /
 * `usage.list`), budgets or not.
 */
export class Budgets implements UsageBudgets {
  readonly #gate: BudgetGate;
  readonly #counter: UsageCounts;
  readonly #now: () => number;
  readonly #chainFor: (agentId: string, entry?: SessionEntry | null) => readonly string[];

  constructor(
    private readonly budgets: Config["usage"]["budgets"],
    opts: BudgetsOptions = {},
  ) {
    this.#now = opts.now ?? Date.now;
    const m = opts.models ?? {};
    this.#chainFor = m.chainFor ? (a, e) => m.chainFor?.(a, e) ?? [] : () => [];
    this.#gate = new BudgetGate(
      budgets,
      opts.ledger ?? new MemoryLedger(this.#now),
      { price: m.price ?? (() => undefined), maxOutputTokens: m.maxOutputTokens ?? (() => undefined) },
      this.#now,
      opts.notify,
    );
    this.#counter = opts.counter ?? new UsageCounter({ now: this.#now });
  }

  admit(
    ctx: UsageContext,
    turn: { runId: string; text: string; entry?: () => Promise<SessionEntry | null> },
  ): Promise<Error | null> {
    return this.#gate.admit(ctx, {
      runId: turn.runId,
      // the first call's prompt: the session's last context (prompt + answer) and the new message
      call: async () => {
        const entry = (await turn.entry?.()) ?? null;
        return {
          chain: this.#chainFor(ctx.agentId, entry),
          promptTokens: (entry?.contextUsedTokens ?? 0) + Math.ceil(turn.text.length / 4), // chars/4, as the prompt's estimate
        };
      },
    });
  }

  release(runIds: readonly string[]): Promise<void> {
    return this.#gate.release(runIds);
  }

  reserve(ctx: UsageContext, call: UsageCall): Promise<UsageTicket> {
    return this.#gate.reserve(ctx, call);
  }

  settle(ticket: UsageTicket, actual: Spend): Promise<void> {
    return this.#gate.settle(ticket, actual);
  }

  record(
    ctx: UsageContext,
    usage: { cost?: number; input: number; output: number },
    opts: { run?: boolean } = {},
  ): void {
    this.#counter.add({
      agentId: ctx.agentId,
      sessionKey: ctx.sessionKey,
      ...(ctx.channel ? { channel: ctx.channel } : {}),
      ...(ctx.model ? { model: ctx.model } : {}),
      costUsd: usage.cost ?? 0,
      input: usage.input,
      output: usage.output,
      ...(opts.run === false ? { run: false } : {}),
    });
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
        spent: await this.#gate.spent(scope, period),
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
