import type { Middleware } from "../compose.js";
import type { InboundCtx } from "../context.js";
import { pairingStore, replyInChat } from "../pairing.js";
import { senderAllowed } from "./access.js";

/**
 * `/pair CODE` (API.md §7 chat commands): an owner approves a pending DM pairing request from
 * the chat. From anyone else the command is dropped (no reply, never passed to a model).
 */

export function parsePairCommand(text: string): { code: string } | { bad: true } | null {
  const m = /^\/pair(?:@\S+)?(?:\s+(\S+))?\s*$/i.exec(text.trim());
  if (!m) return null;
  return m[1] ? { code: m[1] } : { bad: true };
}

export function isOwner(ctx: InboundCtx): boolean {
  return senderAllowed(
    ctx.policy.owners.filter((o) => o !== "*"),
    ctx.msg.channel,
    ctx.msg.senderId,
  );
}

export const pairCommand: Middleware<InboundCtx> = async (ctx, next) => {
  const cmd = parsePairCommand(ctx.msg.text);
  if (!cmd) return next();
  if (!isOwner(ctx)) {
    ctx.dropped = "command-from-non-owner";
    return;
  }
  ctx.dropped = "owner-command";
  if ("bad" in cmd) {
    await replyInChat(ctx, "usage: /pair CODE (see switchboard pairing list)", "command");
    return;
  }
  try {
    const approval = await pairingStore(ctx.services).approve(undefined, cmd.code);
    await replyInChat(
      ctx,
      `Approved: ${approval.channel} user ${approval.senderId} may now message the assistant.`,
      "command",
    );
  } catch (err) {
    await replyInChat(ctx, err instanceof Error ? err.message : String(err), "command");
  }
};
