import { z } from "zod";
import { type InboundMessage, inboundMessageSchema } from "../../src/channels/types.js";
import { formatIssues } from "../../src/errors.js";

/** Facts about the bot that normalisation needs (from auth.test). */
export interface SlackInboundContext {
  accountId: string;
  botUserId: string;
  botId: string;
}

export type InboundResult =
  | {
      kind: "message";
      message: InboundMessage;
      /** Same for the message and app_mention copies of one post. */
      dedupeKey: string;
      /** The Slack conversation id (D…/C…/G…), also for DMs whose peerId is the user. */
      conversationId: string;
      /** False when the event had no channel_type and the chat type was guessed. */
      channelTypeKnown: boolean;
    }
  | { kind: "ignored"; reason: string }
  | { kind: "invalid"; error: string };

/** The fields we read from `message` and `app_mention` events; everything else passes through. */
export const slackMessageEventSchema = z.looseObject({
  type: z.enum(["message", "app_mention"]),
  subtype: z.string().optional(),
  channel: z.string().min(1),
  channel_type: z.enum(["im", "mpim", "channel", "group", "app_home"]).optional(),
  user: z.string().optional(),
  bot_id: z.string().optional(),
  text: z.string().optional(),
  ts: z.string().min(1),
  thread_ts: z.string().optional(),
  parent_user_id: z.string().optional(),
  files: z.array(z.looseObject({ name: z.string().optional(), mimetype: z.string().optional() })).optional(),
});

export type SlackMessageEvent = z.infer<typeof slackMessageEventSchema>;

/** Subtypes that are still a person talking; every other subtype (edits, joins, bot posts) is ignored. */
const HUMAN_SUBTYPES = new Set(["file_share", "thread_broadcast", "me_message"]);

export type ChannelType = NonNullable<SlackMessageEvent["channel_type"]>;

/**
 * One `message` / `app_mention` event → a validated InboundMessage. Slack channels (public
 * and private) are `channel`, multi-person DMs `group`, DMs `direct` with the user id as
 * peer. A reply in a thread keeps `threadId` = the root's `thread_ts`. `app_mention` carries
 * no `channel_type`, so the caller passes what it knows about the conversation.
 */
export function slackEventToInbound(
  raw: unknown,
  ctx: SlackInboundContext,
  extra: { channelType?: ChannelType | undefined; senderName?: string | undefined } = {},
): InboundResult {
  const parsed = slackMessageEventSchema.safeParse(raw);
  if (!parsed.success) return { kind: "invalid", error: formatIssues(parsed.error.issues, "slack event: ") };
  const ev = parsed.data;
  if (ev.subtype !== undefined && !HUMAN_SUBTYPES.has(ev.subtype)) {
    return { kind: "ignored", reason: `subtype ${ev.subtype}` };
  }
  if (ev.user === ctx.botUserId || (ev.bot_id !== undefined && ev.bot_id === ctx.botId)) {
    return { kind: "ignored", reason: "own message" };
  }
  if (!ev.user) return { kind: "ignored", reason: "no user" };

  const channelType = ev.channel_type ?? extra.channelType ?? guessChannelType(ev.channel);
  const chatType =
    channelType === "im" || channelType === "app_home"
      ? "direct"
      : channelType === "mpim"
        ? "group"
        : "channel";
  const text = ev.text ?? "";
  const isReply = ev.thread_ts !== undefined && ev.thread_ts !== ev.ts;
  const candidate = {
    channel: "slack",
    accountId: ctx.accountId,
    chatType,
    peerId: chatType === "direct" ? ev.user : ev.channel,
    ...(isReply ? { threadId: ev.thread_ts } : {}),
    senderId: ev.user,
    ...(extra.senderName ? { senderName: extra.senderName } : {}),
    text,
    messageId: ev.ts,
    wasMentioned: ev.type === "app_mention" || text.includes(`<@${ctx.botUserId}>`),
    replyToBot: isReply && ev.parent_user_id === ctx.botUserId,
    media: (ev.files ?? []).map((f) => ({
      kind: mediaKind(f.mimetype),
      ...(f.name ? { name: f.name } : {}),
    })),
    timestamp: Math.round(Number(ev.ts) * 1000) || undefined,
  };
  const checked = inboundMessageSchema.safeParse(candidate);
  if (!checked.success)
    return { kind: "invalid", error: formatIssues(checked.error.issues, "slack inbound: ") };
  return {
    kind: "message",
    message: checked.data,
    dedupeKey: `${ev.channel}:${ev.ts}`,
    conversationId: ev.channel,
    channelTypeKnown: (ev.channel_type ?? extra.channelType) !== undefined,
  };
}

/** Id prefixes: D… DM, C… public or private channel, G… legacy private channel or MPIM. */
function guessChannelType(channel: string): ChannelType {
  if (channel.startsWith("D")) return "im";
  if (channel.startsWith("G")) return "group";
  return "channel";
}

function mediaKind(mimetype: string | undefined): "image" | "audio" | "video" | "file" {
  if (mimetype?.startsWith("image/")) return "image";
  if (mimetype?.startsWith("audio/")) return "audio";
  if (mimetype?.startsWith("video/")) return "video";
  return "file";
}
