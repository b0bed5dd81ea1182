import type { Middleware } from "../compose.js";
import type { InboundCtx } from "../context.js";

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

/** DM access: `disabled` drops every DM; `allowlist` admits only allowFrom; `open` admits everyone. */
export const dmAccess: Middleware<InboundCtx> = async (ctx, next) => {
  if (ctx.msg.chatType !== "direct") return next();
  const { dmPolicy, allowFrom } = ctx.policy;
  if (dmPolicy === "disabled") {
    ctx.dropped = "dm-disabled";
    return;
  }
  if (dmPolicy === "allowlist" && !senderAllowed(allowFrom, ctx.msg.channel, ctx.msg.senderId)) {
    ctx.dropped = "not-allowed";
    return;
  }
  await next();
};
