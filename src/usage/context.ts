import type { UsageContext } from "../services/index.js";
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
