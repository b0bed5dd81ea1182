import { type BudgetPeriod, periodKey } from "./ledger.js";

/** What `usage.get` / `usage.list` report for one scope and period (API.md §8.4). */
export interface UsageTotals {
  costUsd: number;
  tokens: { input: number; output: number };
  runs: number;
}

export type UsageDimension = "agent" | "session" | "channel" | "model";

/** One finished turn, as counted. */
export interface CountedTurn {
  agentId: string;
  sessionKey: string;
  channel?: string;
  model?: string;
  costUsd: number;
  input: number;
  output: number;
}

const PERIODS: readonly BudgetPeriod[] = ["day", "month"];

function empty(): UsageTotals {
  return { costUsd: 0, tokens: { input: 0, output: 0 }, runs: 0 };
}

/**
 * In-process totals of finished turns for the current UTC day and month: global and per agent,
 * session, channel and model. A period that has ended is dropped when the next turn (or read)
 * arrives, so memory holds at most two periods' rows.
 */
export class UsageCounter {
  /** period → `<scope>` → totals, for the period key in `#current`. */
  readonly #totals = new Map<BudgetPeriod, Map<string, UsageTotals>>();
  readonly #current = new Map<BudgetPeriod, string>();

  constructor(private readonly now: () => number = Date.now) {}

  #table(period: BudgetPeriod): Map<string, UsageTotals> {
    const key = periodKey(period, this.now());
    let t = this.#totals.get(period);
    if (t === undefined || this.#current.get(period) !== key) {
      t = new Map();
      this.#totals.set(period, t);
      this.#current.set(period, key);
    }
    return t;
  }

  add(turn: CountedTurn): void {
    const scopes = ["global", `agent:${turn.agentId}`, `session:${turn.sessionKey}`];
    if (turn.channel) scopes.push(`channel:${turn.channel}`);
    if (turn.model) scopes.push(`model:${turn.model}`);
    for (const period of PERIODS) {
      const table = this.#table(period);
      for (const scope of scopes) {
        let t = table.get(scope);
        if (t === undefined) {
          t = empty();
          table.set(scope, t);
        }
        t.costUsd += turn.costUsd;
        t.tokens.input += turn.input;
        t.tokens.output += turn.output;
        t.runs += 1;
      }
    }
  }

  /** Totals of a scope (`global`, `agent:<id>`, `session:<key>`, `channel:<name>`, `model:<ref>`). */
  get(scope: string, period: BudgetPeriod): UsageTotals {
    const t = this.#table(period).get(scope);
    return t ? { costUsd: t.costUsd, tokens: { ...t.tokens }, runs: t.runs } : empty();
  }

  /** One row per agent / session / channel / model with spend this period, costliest first. */
  list(period: BudgetPeriod, by: UsageDimension): Array<UsageTotals & { key: string }> {
    const prefix = `${by}:`;
    const rows: Array<UsageTotals & { key: string }> = [];
    for (const [scope, t] of this.#table(period)) {
      if (!scope.startsWith(prefix)) continue;
      rows.push({
        key: scope.slice(prefix.length),
        costUsd: t.costUsd,
        tokens: { ...t.tokens },
        runs: t.runs,
      });
    }
    rows.sort(
      (a, b) =>
        b.costUsd - a.costUsd ||
        b.tokens.input + b.tokens.output - (a.tokens.input + a.tokens.output) ||
        a.key.localeCompare(b.key),
    );
    return rows;
  }
}
