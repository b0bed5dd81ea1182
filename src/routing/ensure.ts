import { ensureSession } from "../sessions/service.js";
import type { SessionEntry } from "../store/types.js";
import type { RoutedCtx } from "./context.js";

/** Creates the routed session with what the inbound message tells about it. */
export function ensureRouted(ctx: RoutedCtx): Promise<SessionEntry> {
  const { msg } = ctx;
  return ensureSession(ctx.services, ctx.sessionKey, {
    agentId: ctx.agentId,
    channel: msg.channel,
    chatType: msg.chatType,
    ...(msg.senderName && msg.chatType === "direct" ? { displayName: msg.senderName } : {}),
  });
}
