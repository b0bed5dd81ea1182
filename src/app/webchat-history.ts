import type { WebchatHistoryItem } from "../../channels/webchat/types.js";
import { inboundMessageSchema } from "../channels/types.js";
import { isOperatorProvenance } from "../gateway/chat-send.js";
import { mediaPartsOf, textOfParts } from "../media/parts.js";
import { inboundSessionKey } from "../routing/router.js";
import type { Services } from "../services/index.js";

/** How many recent messages the web chat shows on open and reconnect. */
export const WEBCHAT_HISTORY_LIMIT = 60;

/**
 * A web chat visitor's recent conversation, as the page shows it: the session their messages
 * route to, its user and assistant lines (no tool traffic, no routed inter-session data).
 */
export function webchatHistory(
  services: Pick<Services, "config" | "store">,
  accountId: string,
): (visitorId: string) => Promise<WebchatHistoryItem[]> {
  return async (visitorId) => {
    const msg = inboundMessageSchema.parse({
      channel: "webchat",
      accountId,
      chatType: "direct",
      peerId: visitorId,
      senderId: visitorId,
      text: "",
      messageId: "history",
    });
    const { sessionKey } = inboundSessionKey(services.config, msg);
    const entry = await services.store.sessions.get(sessionKey);
    if (!entry) return [];
    const tail = await services.store.transcripts.readTail(
      { agentId: entry.agentId, sessionId: entry.sessionId },
      { limit: WEBCHAT_HISTORY_LIMIT * 2, includeTools: false },
    );
    const out: WebchatHistoryItem[] = [];
    for (const m of tail) {
      const text = textOfParts(m.content);
      const parts = mediaPartsOf(m.content);
      if (text === null || (text.trim() === "" && parts.length === 0)) continue;
      if (m.role === "assistant") out.push({ id: m.id, role: "assistant", text, at: m.timestamp });
      else if (
        m.role === "user" &&
        (!m.provenance || (m.provenance.kind === "external_user" && !isOperatorProvenance(m.provenance)))
      )
        out.push({ id: m.id, role: "user", text, at: m.timestamp, ...(parts.length ? { parts } : {}) });
    }
    return out.slice(-WEBCHAT_HISTORY_LIMIT);
  };
}
