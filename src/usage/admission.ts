import type { Config } from "../config/schema.js";
import { SwitchboardError } from "../errors.js";
import type { UsageCall, UsageContext, UsageTicket } from "../services/index.js";
import {
  type BudgetLimit,
  type BudgetPeriod,
  type Ledger,
  periodEnd,
  periodKey,
  type Spend,
} from "./ledger.js";

type BudgetConfig = Config["usage"]["budgets"][number];

/** USD per million tokens, as configured for a model. */
export interface CallPrice {
  inputPerMTok: number;
  outputPerMTok: number;
  cacheWritePerMTok: number;
}

/** A `warnAt` notice: to the chat of `sessionKey` and to the owners, once per budget and period (`key`). */
export interface BudgetNotice {
  sessionKey: string;
  text: string;
  key: string;
}

/** What the expected cost of a model call is computed from (src/app passes the model registry's). */
export interface CallCosts {
  price(ref: string): CallPrice | undefined;
  maxOutputTokens(ref: string): number | undefined;
}

/** The output cap assumed for a model whose cap is neither configured nor known. */
export const DEFAULT_OUTPUT_TOKENS = 4096;
/** An admitted turn's hold lapses if its run has not made its first model call by then. */
export const HOLD_TTL_MS = 10 * 60_000;
/** A call's reservation lapses if it is not settled by then (its process died mid-call). */
export const CALL_TTL_MS = 10 * 60_000;

/** One account kept for a turn (budgets of the same scope and period share it). */
interface Matched {
  limits: BudgetLimit[];
  /** Any `block` budget among them (only then is a turn admitted or refused). */
  block: boolean;
  /** The matching budgets with their index in `usage.budgets`, for `warnAt`. */
  rules: Array<{ index: number; budget: BudgetConfig; limit: number }>;
}

const NONE: Matched = { limits: [], block: false, rules: [] };

function fmtSpent(limit: { maxCostUsd: number | null; maxTokens: number | null }, spent: Spend): string {
  return limit.maxCostUsd !== null && (limit.maxTokens === null || spent.costUsd >= limit.maxCostUsd)
    ? `$${spent.costUsd.toFixed(4)} of $${limit.maxCostUsd}`
    : `${spent.tokens} of ${limit.maxTokens} tokens`;
}

const minOf = (a: number | null, b: number | null): number | null =>
  a === null ? b : b === null ? a : Math.min(a, b);

/**
 * Budget admission and per-call reservations over a Ledger (API.md §8.4). A new turn is admitted
 * while settled + reserved is under every matching `block` budget, and holds its first call's
 * expected cost; before each model call the run reserves that call's expected cost (the first
 * takes the hold over), and settles the real cost after. Scope match: `global`, `agent:<id>`,
 * `session:<key>`, `channel:<name>`; `warn` budgets are accounted the same way but never refuse.
 */
export class BudgetGate {
  /** `<budget index>|<period key>` whose notice this process sent or saw claimed. */
  readonly #warned = new Set<string>();
  /**
   * Runs whose holds a first model call in this process took over (the ledger gave them back
   * then, admitted or refused): their turn's release has nothing left to ask the ledger for.
   */
  readonly #tookOver = new Set<string>();

  constructor(
    private readonly budgets: readonly BudgetConfig[],
    private readonly ledger: Ledger,
    private readonly costs: CallCosts,
    private readonly now: () => number,
    private readonly notify?: (n: BudgetNotice) => void,
  ) {}

  #match(ctx: UsageContext): Matched {
    if (this.budgets.length === 0) return NONE;
    let m: Matched | undefined;
    this.budgets.forEach((b, index) => {
      const s = b.scope;
      if (
        s !== "global" &&
        s !== `agent:${ctx.agentId}` &&
        s !== `session:${ctx.sessionKey}` &&
        (ctx.channel === undefined || s !== `channel:${ctx.channel}`)
      )
        return;
      m ??= { limits: [], block: false, rules: [] };
      const block = b.action === "block";
      let i = m.limits.findIndex((l) => l.scope === s && l.period === b.period);
      if (i < 0) {
        i = m.limits.push({ scope: s, period: b.period, maxCostUsd: null, maxTokens: null }) - 1;
      }
      const l = m.limits[i] as BudgetLimit;
      if (block) {
        l.maxCostUsd = minOf(l.maxCostUsd, b.maxCostUsd);
        l.maxTokens = minOf(l.maxTokens, b.maxTokens);
        m.block = true;
      }
      m.rules.push({ index, budget: b, limit: i });
    });
    return m ?? NONE;
  }

  /**
   * The most a call over `chain` with a prompt of `promptTokens` can cost: over the chain's models
   * (any of them may answer), the prompt at the dearer of the input and cache-write prices plus
   * the model's whole output cap at the output price. A call never costs more than it reserved.
   */
  expected(chain: readonly string[], promptTokens: number): Spend {
    let costUsd = 0;
    let out = 0;
    for (const ref of chain) {
      const cap = this.costs.maxOutputTokens(ref) ?? DEFAULT_OUTPUT_TOKENS;
      if (cap > out) out = cap;
      const p = this.costs.price(ref);
      if (p === undefined) continue;
      const c =
        (promptTokens * Math.max(p.inputPerMTok, p.cacheWritePerMTok) + cap * p.outputPerMTok) / 1_000_000;
      if (c > costUsd) costUsd = c;
    }
    return { costUsd, tokens: promptTokens + (out || DEFAULT_OUTPUT_TOKENS) };
  }

  /** BUDGET_EXCEEDED naming the budget, what it has spent and when it resets. */
  #refusal(limit: BudgetLimit, spent: Spend): SwitchboardError {
    const resetsAt = periodEnd(limit.period, this.now());
    return new SwitchboardError(
      "BUDGET_EXCEEDED",
      `budget ${limit.scope} per ${limit.period} is spent (${fmtSpent(limit, spent)}); it resets at ${new Date(resetsAt).toISOString()}`,
      { details: { scope: limit.scope, period: limit.period, resetsAt, spent } },
    );
  }

  /**
   * A new turn: refused (the BUDGET_EXCEEDED error) when a matching `block` budget has reached its
   * limit (settled + reserved); else its hold (`turn:<runId>`, the expected cost of its first call,
   * sized by `call` only when a budget applies) is reserved, for that call to take over. null when
   * admitted.
   */
  async admit(
    ctx: UsageContext,
    turn: { runId: string; call: () => Promise<{ chain: readonly string[]; promptTokens: number }> },
  ): Promise<SwitchboardError | null> {
    const m = this.#match(ctx);
    if (!m.block) return null;
    const call = await turn.call();
    const a = await this.ledger.reserve(m.limits, this.expected(call.chain, call.promptTokens), {
      id: `turn:${turn.runId}`,
      ttlMs: HOLD_TTL_MS,
    });
    // a new hold for a run whose earlier one was taken over (a redelivery): released as any other
    this.#tookOver.delete(turn.runId);
    return a.ok ? null : this.#refusal(a.limit, a.spent);
  }

  /**
   * Gives back the holds these runs were admitted with, those their first model call did not take
   * over (a command, a failure before or around it), in the period each was reserved in. Runs
   * whose first call in this process took their holds over ask nothing (on Redis, the script a
   * turn that made a call would spend finding nothing); for the rest the ledger is asked (an id
   * it does not hold is skipped), whatever is configured now: the session row may have changed
   * since the admission, and the hold may have been admitted under a `block` budget this
   * process's config no longer has (bullmq: a gateway still on the old config admitted it into
   * the shared accounts).
   */
  async release(runIds: readonly string[]): Promise<void> {
    const held = runIds.filter((runId) => !this.#tookOver.delete(runId));
    if (held.length === 0) return;
    await this.ledger.release(held.map((runId) => `turn:${runId}`));
  }

  /**
   * Before a model call of run `runId` (its `index`-th): reserves the call's expected cost, or
   * throws BUDGET_EXCEEDED. The first call takes over the holds of the turn's runs (`takesOver`).
   */
  async reserve(ctx: UsageContext, call: UsageCall): Promise<UsageTicket> {
    const m = this.#match(ctx);
    if (m.limits.length === 0) return { ctx, reservation: null };
    const a = await this.ledger.reserve(m.limits, this.expected(call.chain, call.promptTokens), {
      id: `call:${call.runId}:${call.index}`,
      ttlMs: CALL_TTL_MS,
      ...(call.takesOver?.length ? { takesOver: call.takesOver.map((r) => `turn:${r}`) } : {}),
    });
    for (const runId of call.takesOver ?? []) this.#tookOver.add(runId);
    if (!a.ok) throw this.#refusal(a.limit, a.spent);
    return { ctx, reservation: a.reservation };
  }

  /** After the call: the real spend replaces the reservation (zero: the call failed); `warnAt` notices. */
  async settle(ticket: UsageTicket, actual: Spend): Promise<void> {
    const r = ticket.reservation;
    if (r === null) return;
    const settled = await this.ledger.settle(r, actual);
    if (this.notify === undefined || (actual.costUsd === 0 && actual.tokens === 0)) return;
    const m = this.#match(ticket.ctx);
    for (const rule of m.rules) {
      const spent = settled[rule.limit];
      if (spent !== undefined) await this.#maybeWarn(ticket.ctx, rule.index, rule.budget, spent);
    }
  }

  /** One notice per budget and period (across processes: the ledger's claim) once spend reaches `warnAt`. */
  async #maybeWarn(ctx: UsageContext, index: number, b: BudgetConfig, spent: Spend): Promise<void> {
    const reached =
      (b.maxCostUsd !== null && spent.costUsd >= b.warnAt * b.maxCostUsd) ||
      (b.maxTokens !== null && spent.tokens >= b.warnAt * b.maxTokens);
    if (!reached) return;
    const now = this.now();
    const pk = periodKey(b.period, now);
    const seen = `${index}|${pk}`;
    if (this.#warned.has(seen)) return;
    if (this.#warned.size > 1000) this.#warned.clear();
    this.#warned.add(seen);
    const key = `budget-warn:${index}:${b.scope}:${pk}`;
    if (!(await this.ledger.claimOnce(b.period, key))) return;
    const text =
      `Budget ${b.scope} per ${b.period} has reached ${Math.round(b.warnAt * 100)}% ` +
      `(${fmtSpent(b, spent)}); it resets at ${new Date(periodEnd(b.period, now)).toISOString()}.`;
    this.notify?.({ sessionKey: ctx.sessionKey, text, key });
  }

  /** Settled spend of a scope this period (`usage.get`'s `budget.spent`). */
  async spent(scope: string, period: BudgetPeriod): Promise<Spend> {
    return (await this.ledger.spent(scope, period)).settled;
  }
}
