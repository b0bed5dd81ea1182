import type { Middleware } from "../compose.js";
import type { InboundCtx } from "../context.js";

/** In groups and channels the bot answers only when addressed, unless requireMention is false. */
export function isAddressed(ctx: InboundCtx): boolean {
  const { msg, policy } = ctx;
  if (msg.chatType === "direct" || !policy.requireMention) return true;
  if (msg.wasMentioned || msg.replyToBot) return true;
  return policy.mentionPatterns.some((p) => {
    try {
      return new RegExp(p, "i").test(msg.text);
    } catch {
      return false;
    }
  });
}

export const mentionGate: Middleware<InboundCtx> = async (ctx, next) => {
  if (!isAddressed(ctx)) {
    ctx.dropped = "not-mentioned";
    return;
  }
  await next();
};
