import type { DeliveryContext, SessionEntry } from "../store/types.js";

/**
 * Where a session replies: its delivery context, else its last channel and chat (with the last
 * account and thread), else nowhere. The one answer to the question: delivery posts there, the
 * send policy judges that channel (policy/access.ts `sendDecision`), and so the /status card
 * reports what delivery would do.
 */
export function routeOf(entry: SessionEntry): DeliveryContext | null {
  if (entry.deliveryContext) return entry.deliveryContext;
  if (entry.lastChannel && entry.lastTo) {
    return {
      channel: entry.lastChannel,
      to: entry.lastTo,
      ...(entry.lastAccountId ? { accountId: entry.lastAccountId } : {}),
      ...(entry.lastThreadId ? { threadId: entry.lastThreadId } : {}),
    };
  }
  return null;
}
