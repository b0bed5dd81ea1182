import type { RoutedCtx } from "../context.js";

/**
 * Answers a chat command in the chat it came from (its thread or topic kept), once per platform
 * message, outside the send policy: the owner and session commands both reply this way.
 */
export async function replyToCommand(ctx: RoutedCtx, text: string): Promise<void> {
  const { msg } = ctx;
  await ctx.services.delivery.deliver({
    sessionKey: ctx.sessionKey,
    text,
    idempotencyKey: `command:${msg.channel}:${msg.accountId}:${msg.messageId}`,
    route: {
      channel: msg.channel,
      to: msg.peerId,
      accountId: msg.accountId,
      ...(msg.threadId ? { threadId: msg.threadId } : msg.topicId ? { threadId: msg.topicId } : {}),
    },
    bypassPolicy: true,
  });
}
