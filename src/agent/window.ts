import type { ContextPruningConfig } from "../config/context.js";
import type { ModelMessage } from "../services/models.js";
import type { TranscriptMessage } from "../store/types.js";
import { type SessionContext, summaryTokens, withSummary } from "./compaction.js";
import { estimateTokens, fitWindow, windowUnits } from "./prompt.js";
import { type PruneStats, pruneUnits } from "./pruning.js";

/**
 * What one model call sends, from a session context (latest compaction + uncovered messages):
 * the system prompt with the summary, the uncovered messages as model messages, pruned (in
 * memory) when pruning is due, then cut to the budget (newest kept). Also the estimate compaction
 * decides on: provider-reported prompt size where a call already reported it, chars/4 only for
 * what was not sent yet.
 */

/** A reported prompt size: `tokens` were sent up to and including message `id`. */
export interface UsageAnchor {
  id: string;
  tokens: number;
}

export interface PromptPlan {
  system: string;
  messages: ModelMessage[];
  /** Estimated prompt tokens of the whole uncovered context (system, tools, every message). */
  estimate: number;
  /** The uncovered messages do not fit the budget: the window had to drop some. */
  overBudget: boolean;
  /** Units dropped by the window. */
  dropped: number;
  /** Estimated tokens of what is sent (for sizes no provider reported). */
  sentEstimate: number;
  pruned: PruneStats | null;
  /** The last message the prompt covers (anchor for the reported usage of this call). */
  lastId: string | undefined;
}

/** The newest reported prompt size among the messages written after the latest compaction. */
export function usageAnchor(ctx: SessionContext): UsageAnchor | undefined {
  for (let i = ctx.messages.length - 1; i >= ctx.afterLine; i--) {
    const m = ctx.messages[i];
    if (m?.role !== "assistant" || !m.usage) continue;
    const u = m.usage;
    const tokens = u.input + (u.cacheRead ?? 0) + (u.cacheWrite ?? 0) + u.output;
    if (tokens > 0) return { id: m.id, tokens };
  }
  return undefined;
}

function estimateMessages(messages: readonly TranscriptMessage[]): number {
  let n = 0;
  for (const m of messages) n += estimateTokens(m.content) + 4;
  return n;
}

/** When the session last called a model (newest assistant or tool-call line), for cache-ttl pruning. */
export function lastModelCallAt(ctx: SessionContext): number | undefined {
  for (let i = ctx.messages.length - 1; i >= 0; i--) {
    const m = ctx.messages[i];
    if (m && (m.role === "assistant" || m.role === "toolCall")) return m.timestamp;
  }
  return undefined;
}

export function planPrompt(
  ctx: SessionContext,
  o: {
    system: string;
    specsTokens: number;
    windowTokens: number;
    budgetRatio: number;
    pruning: ContextPruningConfig | null;
    anchor?: UsageAnchor | undefined;
  },
): PromptPlan {
  const summary = ctx.compaction?.summary;
  const system = withSummary(o.system, summary);
  const baseTokens = estimateTokens(o.system) + summaryTokens(summary) + o.specsTokens;
  let { units, costs } = windowUnits(ctx.messages);
  let pruned: PruneStats | null = null;
  if (o.pruning) {
    const r = pruneUnits(units, o.pruning, { windowTokens: o.windowTokens, baseChars: baseTokens * 4 });
    units = r.units;
    pruned = r.stats;
    // Pruned units differ from what their messages say: estimated afresh.
    costs = units.map((u) => estimateTokens(u));
  }
  const unitsTokens = costs.reduce((n, c) => n + c, 0);
  const budget = Math.max(512, Math.floor(o.windowTokens * o.budgetRatio) - baseTokens);
  const { messages, dropped } = fitWindow(units, budget, costs);
  let sentEstimate = baseTokens;
  for (let i = dropped; i < costs.length; i++) sentEstimate += costs[i] ?? 0;

  let estimate = baseTokens + unitsTokens;
  const anchor = o.anchor ?? usageAnchor(ctx);
  if (anchor && !pruned?.hardCleared && !pruned?.softTrimmed) {
    const at = ctx.messages.findLastIndex((m) => m.id === anchor.id);
    if (at >= 0) estimate = Math.max(anchor.tokens + estimateMessages(ctx.messages.slice(at + 1)), 0);
  }
  return {
    system,
    messages,
    estimate,
    overBudget: unitsTokens > budget,
    dropped,
    sentEstimate,
    pruned,
    lastId: ctx.messages.at(-1)?.id,
  };
}
