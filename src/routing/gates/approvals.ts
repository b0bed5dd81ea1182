import { type Decision, resolveApproval } from "../../approvals/index.js";
import { type ApprovalRecord, ApprovalStore } from "../../approvals/store.js";
import { type InboundAction, inboundActionSchema } from "../../channels/types.js";
import { channelSettings } from "../../config/channels.js";
import type { Config } from "../../config/schema.js";
import { formatIssues } from "../../errors.js";
import type { Middleware } from "../compose.js";
import type { RoutedCtx, RouterDeps } from "../context.js";
import { ensureRouted } from "../ensure.js";
import { senderAllowed } from "./access.js";
import { chatOf, replyToCommand } from "./command-reply.js";

/**
 * Approval decisions from the chats (API.md §8.3): a press of a request's button (the adapters
 * hand it to `handleApprovalPress`), `/approve <id> allow-once|allow-always|deny` from any chat,
 * and on channels without buttons a numbered reply (`1`, `2`, `3`) in the chat the request was
 * posted to. Only approvers decide (`tools.approvals.approvers`); anyone else is told it is not
 * theirs and nothing changes.
 */

const ACTION_RE = /^ap:(ap_[0-9a-f]{20}):(once|always|deny)$/;
const APPROVE_RE = /^\/approve(?:@\S+)?(?:\s+(\S+))?(?:\s+(\S+))?\s*$/i;
const NUMBERED: Record<string, Decision> = { "1": "allow-once", "2": "allow-always", "3": "deny" };
const WORDS: Record<string, Decision> = {
  "allow-once": "allow-once",
  once: "allow-once",
  allow: "allow-once",
  "allow-always": "allow-always",
  always: "allow-always",
  deny: "deny",
};
const DONE: Record<Decision, string> = {
  "allow-once": "Allowed once.",
  "allow-always": "Allowed, now and from now on.",
  deny: "Denied.",
};

/**
 * Whether `<channel>:<senderId>` may decide `rec`. The web chat sits behind the gateway token,
 * so whoever uses it is the operator and may decide its requests.
 */
export function isApprover(config: Config, rec: ApprovalRecord, channel: string, senderId: string): boolean {
  if (channel === "webchat") return rec.route?.channel === "webchat";
  const approvers = config.tools.approvals.approvers;
  if (Array.isArray(approvers)) return senderAllowed(approvers, channel, senderId);
  const owners = (channelSettings(config, channel)?.owners ?? []).filter((o) => o !== "*");
  if (senderAllowed(owners, channel, senderId)) return true;
  return approvers === "requester" && rec.requester?.toLowerCase() === `${channel}:${senderId}`.toLowerCase();
}

function who(channel: string, senderId: string, name?: string): string {
  return `${channel}:${senderId}${name ? ` (${name})` : ""}`;
}

async function decide(
  services: RouterDeps,
  rec: ApprovalRecord,
  decision: Decision,
  from: { channel: string; senderId: string; senderName?: string },
): Promise<string> {
  const res = await resolveApproval(services, rec.id, decision, {
    by: who(from.channel, from.senderId, from.senderName),
    approver: isApprover(services.config, rec, from.channel, from.senderId),
  });
  if (res.ok) return DONE[decision];
  if (res.code === "FORBIDDEN") return "Not yours: only an approver may decide this request.";
  return `Nothing changed: ${res.message}.`;
}

/** A button press (validated again here: adapters hand over what the platform said). */
export async function handleApprovalPress(
  services: RouterDeps,
  raw: InboundAction,
): Promise<{ notice?: string }> {
  const parsed = inboundActionSchema.safeParse(raw);
  if (!parsed.success) return { notice: `Refused: ${formatIssues(parsed.error.issues)}` };
  const press = parsed.data;
  const m = ACTION_RE.exec(press.actionId);
  if (!m) return { notice: "Refused: this button is not one of ours." };
  const rec = await new ApprovalStore(services.store).get(m[1]!);
  if (!rec) return { notice: "Refused: this request is unknown." };
  const route = rec.route;
  if (
    !route ||
    route.channel !== press.channel ||
    route.to !== press.peerId ||
    (route.accountId !== undefined && route.accountId !== press.accountId)
  ) {
    services.logger.warn(
      { approvalId: rec.id, channel: press.channel, peerId: press.peerId },
      "approval press from another chat refused",
    );
    return { notice: "Refused: this button belongs to another chat." };
  }
  const decision: Decision = m[2] === "once" ? "allow-once" : m[2] === "always" ? "allow-always" : "deny";
  return { notice: await decide(services, rec, decision, press) };
}

/** Answers in the chat; a stranger without a session here gets no answer (and no session). */
async function answer(ctx: RoutedCtx, text: string, approver: boolean): Promise<void> {
  if (!ctx.entry && !(await ctx.services.store.sessions.get(ctx.sessionKey))) {
    if (!approver) return;
    await ensureRouted(ctx);
  }
  await replyToCommand(ctx, text);
}

/** `/approve <id> <decision>` anywhere, and `1`/`2`/`3` in a chat with a pending request. */
export const approvalCommands: Middleware<RoutedCtx> = async (ctx, next) => {
  const { msg, services } = ctx;
  const text = msg.text.trim();
  const store = new ApprovalStore(services.store);
  const command = APPROVE_RE.exec(text);
  if (command) {
    ctx.dropped = "approval-command";
    const [, id, word] = command;
    const decision = word ? WORDS[word.toLowerCase()] : undefined;
    if (!id || !decision) {
      await answer(ctx, "usage: /approve <id> allow-once|allow-always|deny", false);
      return;
    }
    const rec = await store.get(id);
    if (!rec) {
      await answer(ctx, `No approval request ${id}.`, false);
      return;
    }
    const approver = isApprover(services.config, rec, msg.channel, msg.senderId);
    await answer(ctx, await decide(services, rec, decision, msg), approver);
    return;
  }
  const numbered = NUMBERED[text];
  if (numbered) {
    const rec = await store.pendingInChat(chatOf(msg), services.now());
    if (rec && !services.channels.get(msg.channel, msg.accountId)?.capabilities.buttons) {
      ctx.dropped = "approval-reply";
      const approver = isApprover(services.config, rec, msg.channel, msg.senderId);
      await answer(ctx, await decide(services, rec, numbered, msg), approver);
      return;
    }
  }
  return next();
};
