import { channelSettings } from "../../config/channels.js";
import type { CommandAccess } from "../../config/context.js";
import type { Config } from "../../config/schema.js";
import { sendBlocked } from "../../policy/access.js";
import { resetSession } from "../../sessions/reset.js";
import type { Middleware } from "../compose.js";
import type { RoutedCtx } from "../context.js";
import { ensureRouted } from "../ensure.js";
import { senderAllowed } from "./access.js";
import { replyToCommand } from "./command-reply.js";

/**
 * Session commands (API.md §7), standalone messages from anyone allowed to talk in the chat:
 * `/new` and `/reset` start a new sessionId for this chat's session (the old transcript is
 * archived, still readable by its sessionId; the confirmation obeys the send policy, SEMANTICS §2); `/compact [instructions]` summarises the older part
 * of the conversation now (it runs in the session's lane, after a running turn). Who may use them
 * is `channels.<name>.commands.{reset,compact}`: "all" (default), "owners" or "off" (then the
 * text is an ordinary message).
 */

export type SessionCommand =
  | { kind: "reset"; word: "new" | "reset" }
  | { kind: "compact"; instructions?: string };

/** Focus instructions are bounded (the reference gateway allows 800 code points). */
export const MAX_COMPACT_INSTRUCTIONS = 800;

export function parseSessionCommand(text: string): SessionCommand | null {
  const m = /^\/(new|reset|compact)(?:@\S+)?(?:\s+([\s\S]*))?$/i.exec(text.trim());
  if (!m) return null;
  const word = (m[1] ?? "").toLowerCase();
  const rest = (m[2] ?? "").trim();
  if (word === "compact") {
    const instructions = [...rest].slice(0, MAX_COMPACT_INSTRUCTIONS).join("");
    return instructions ? { kind: "compact", instructions } : { kind: "compact" };
  }
  if (rest) return null; // `/new something` is not the command
  return { kind: "reset", word: word === "new" ? "new" : "reset" };
}

function commandAccess(config: Config, channel: string, kind: SessionCommand["kind"]): CommandAccess {
  return channelSettings(config, channel)?.commands?.[kind] ?? "all";
}

export const sessionCommands: Middleware<RoutedCtx> = async (ctx, next) => {
  const cmd = parseSessionCommand(ctx.msg.text);
  if (!cmd) return next();
  const { services, msg } = ctx;
  const access = commandAccess(services.config, msg.channel, cmd.kind);
  if (access === "off") return next();
  if (access === "owners" && !senderAllowed(ctx.policy.owners, msg.channel, msg.senderId)) {
    ctx.dropped = "command-from-non-owner";
    return;
  }
  const existed = ctx.entry !== null;
  const entry = ctx.entry ?? (await ensureRouted(ctx));
  if (cmd.kind === "reset") {
    // A chat without a session gets its first one; nothing to archive then.
    const r = existed ? await resetSession(services, entry.key, "command") : null;
    ctx.entry = r?.entry ?? entry;
    // Unlike the owner commands, these answer only where the bot may talk: a denied chat gets no reply.
    if (!sendBlocked(services, ctx.entry))
      await replyToCommand(
        ctx,
        r ? "Started a new session. The previous conversation is archived." : "Started a new session.",
      );
  } else {
    await services.pipeline.submitTurn({
      sessionKey: entry.key,
      agentId: entry.agentId,
      text: msg.text,
      deliver: true,
      origin: "command",
      runId: `compact:${msg.channel}:${msg.accountId}:${msg.messageId}`.slice(0, 200),
      meta: {
        command: "compact",
        ...(cmd.instructions ? { instructions: cmd.instructions } : {}),
      },
    });
  }
  ctx.dropped = "session-command";
};
