import type { UsageContext } from "../services/index.js";
import { deriveChannel } from "../sessions/keys.js";
import type { SessionEntry } from "../store/types.js";

/** Who a model call is for, as budgets match it (`usage.budgets` scopes: agent, session, channel). */
export function usageContext(entry: SessionEntry): UsageContext {
  const channel = deriveChannel(entry.key, entry);
  return { agentId: entry.agentId, sessionKey: entry.key, ...(channel ? { channel } : {}) };
}
