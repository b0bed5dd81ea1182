import type { Middleware } from "../compose.js";
import type { InboundCtx } from "../context.js";
import { pairingReply, pairingStore, replyInChat } from "../pairing.js";

/** Matches a sender against allowFrom entries: `*`, the bare id, or `<channel>:<id>` (case-insensitive). */
export function senderAllowed(list: readonly string[], channel: string, senderId: string): boolean {
  const id = senderId.trim().toLowerCase();
  return list.some((raw) => {
    const e = raw.trim().toLowerCase();
    return (
      e === "*" ||
      e === id ||
      e === `${channel}:${id}` ||
      (e.startsWith("+") && id.replace(/^\+/, "") === e.slice(1))
    );
  });
}

/**
 * DM access (API.md §7): owners and senders in `allowFrom` (`"*"` = everyone) always pass;
 * `disabled` drops every other DM; `allowlist` admits no one else; `open` admits everyone;
 * `pairing` (the default) admits senders the owner approved and answers anyone else with a
 * one-time pairing code — their message never reaches a model.
 */
export const dmAccess: Middleware<InboundCtx> = async (ctx, next) => {
  if (ctx.msg.chatType !== "direct") return next();
  const { dmPolicy, allowFrom, owners } = ctx.policy;
  const { channel, accountId, senderId } = ctx.msg;
  const owner = senderAllowed(
    owners.filter((o) => o !== "*"),
    channel,
    senderId,
  );
  if (owner || senderAllowed(allowFrom, channel, senderId) || dmPolicy === "open") return next();
  if (dmPolicy === "disabled") {
    ctx.dropped = "dm-disabled";
    return;
  }
  if (dmPolicy === "allowlist") {
    ctx.dropped = "not-allowed";
    return;
  }
  const pairing = pairingStore(ctx.services);
  if (await pairing.isApproved(channel, accountId, senderId)) return next();
  const r = await pairing.request(channel, accountId, senderId, ctx.msg.senderName);
  ctx.dropped = "pairing-required";
  // The code is sent only when a request is created: later messages are dropped silently.
  if (r?.created) await replyInChat(ctx, pairingReply(r.request), "pairing");
};
