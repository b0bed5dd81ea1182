import type { Middleware } from "../compose.js";
import type { InboundCtx } from "../context.js";

/** Platforms redeliver (webhook retries, reconnects): a message id is processed once per channel+account. */
const DEDUPE_TTL_MS = 24 * 3600_000;

export const dedupe: Middleware<InboundCtx> = async (ctx, next) => {
  const { channel, accountId, messageId } = ctx.msg;
  // Message ids are unique per chat on Telegram and Slack, so the chat is part of the key.
  const claimed = await ctx.services.store.outbox.claim(
    `inbound:${channel}:${accountId}:${ctx.msg.peerId}:${messageId}`,
    DEDUPE_TTL_MS,
  );
  if (!claimed) {
    ctx.dropped = "duplicate";
    return;
  }
  await next();
};
