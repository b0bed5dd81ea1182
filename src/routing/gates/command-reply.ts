import type { InboundMessage } from "../../channels/types.js";
import type { DeliveryContext } from "../../store/types.js";
import type { RoutedCtx } from "../context.js";

/** The chat a message came from, as a delivery route (its thread, else its forum topic, kept). */
export function chatOf(msg: InboundMessage): DeliveryContext {
  return {
    channel: msg.channel,
    to: msg.peerId,
    accountId: msg.accountId,
    ...(msg.threadId ? { threadId: msg.threadId } : msg.topicId ? { threadId: msg.topicId } : {}),
  };
}

/**
 * Answers a chat command in the chat it came from (its thread or topic kept), once per platform
 * message, outside the send policy: the owner and session commands both reply this way, and so
 * does a refused turn (`purpose` "budget": its own idempotency key).
 */
export async function replyToCommand(
  ctx: RoutedCtx,
  text: string,
  purpose: "command" | "budget" = "command",
): Promise<void> {
  const { msg } = ctx;
  await ctx.services.delivery.deliver({
    sessionKey: ctx.sessionKey,
    text,
    idempotencyKey: `${purpose}:${msg.channel}:${msg.accountId}:${msg.messageId}`,
    route: chatOf(msg),
    bypassPolicy: true,
  });
}
