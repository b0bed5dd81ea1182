import type { Services, UsageContext } from "../services/index.js";
import { deriveChannel } from "../sessions/keys.js";
import type { SessionEntry } from "../store/types.js";

/**
 * Who a turn or a model call is for, as budgets match it (`usage.budgets` scopes: agent, session,
 * channel): the same from the session row whether a turn is being admitted or its calls charged.
 */
export function usageContext(
  entry: Pick<SessionEntry, "key" | "agentId"> & Partial<Pick<SessionEntry, "channel" | "lastChannel">>,
): UsageContext {
  const channel = deriveChannel(entry.key, entry);
  return { agentId: entry.agentId, sessionKey: entry.key, ...(channel ? { channel } : {}) };
}

/**
 * Gives back the budget holds of admitted runs (API.md §8.4): where a turn admitted for them was
 * not submitted after all, and where their turn is over (a hold its first model call took over is
 * no longer held). Never throws: a hold that could not be given back lapses (src/usage/admission.ts).
 */
export async function releaseHolds(
  services: Partial<Pick<Services, "usage">> & Pick<Services, "logger">,
  runIds: readonly string[],
): Promise<void> {
  try {
    await services.usage?.release(runIds);
  } catch (err) {
    services.logger.warn({ err, runIds }, "budget: holds not released (they lapse)");
  }
}
