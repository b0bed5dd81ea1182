import type { Services, UsageCall } from "../services/index.js";
import type { ChainResult, ModelResponse } from "../services/models.js";
import type { SessionEntry, Usage } from "../store/types.js";
import { usageContext } from "../usage/context.js";
import { NO_SPEND, type Spend } from "../usage/ledger.js";
import { priceOf, priceUsage } from "./providers/index.js";

/**
 * One model call under the budgets (API.md §8.4), a turn's or a compaction's: its expected cost is
 * reserved first (BUDGET_EXCEEDED is thrown before the call), the real cost of the model that
 * answered is settled after, and a call that failed gives its reservation back. Returns the
 * chain's answer and its priced usage.
 */
export async function budgetedCall(
  services: Pick<Services, "usage" | "config">,
  entry: SessionEntry,
  call: UsageCall,
  complete: () => Promise<ChainResult<ModelResponse>>,
): Promise<{ chained: ChainResult<ModelResponse>; priced: Usage }> {
  const ticket = await services.usage?.reserve(usageContext(entry), call);
  let spent: Spend = NO_SPEND;
  try {
    const chained = await complete();
    const { usage } = chained.result;
    const priced = priceUsage(usage, priceOf(services.config.models.providers, chained.ref));
    spent = { costUsd: priced.cost ?? 0, tokens: usage.input + usage.output };
    return { chained, priced };
  } finally {
    if (ticket) await services.usage?.settle(ticket, spent);
  }
}
