import { ChannelType, type Message, MessageFlags } from "discord.js";
import { type InboundMessage, inboundMessageSchema } from "../../src/channels/types.js";
import { formatIssues } from "../../src/errors.js";

/** Facts about the bot that normalisation needs (from READY). */
export interface DiscordInboundContext {
  accountId: string;
  botUserId: string;
}

/**
 * What normalisation reads from one discord.js Message, as plain data (so the rules below
 * are testable without the SDK's object graph).
 */
export interface DiscordMessageFacts {
  id: string;
  content: string;
  authorId: string;
  authorIsBot: boolean;
  authorName: string | undefined;
  /** Joins, pins, boosts, thread-created notices, … */
  system: boolean;
  /** The chat the message was posted in (the thread itself for thread messages). */
  channelId: string;
  kind: "dm" | "group-dm" | "guild" | "thread";
  /** Thread messages: the channel (text or forum) the thread hangs off. */
  parentId: string | undefined;
  mentionedUserIds: string[];
  /** Author of the message this one replies to, when it is a reply. */
  repliedUserId: string | undefined;
  attachments: DiscordAttachmentFacts[];
  /** The message is a voice message (flag IS_VOICE_MESSAGE): its one audio attachment is a voice note. */
  voice?: boolean;
  stickerCount: number;
  createdTimestamp: number;
}

/** One attachment as Discord declared it (sizes, types and URLs are the sender's / CDN's claims). */
export interface DiscordAttachmentFacts {
  name: string | undefined;
  contentType: string | undefined;
  url?: string;
  size?: number;
  width?: number;
  height?: number;
  durationSeconds?: number;
}

export type InboundResult =
  | { kind: "message"; message: InboundMessage; facts: DiscordMessageFacts }
  | { kind: "ignored"; reason: string }
  | { kind: "invalid"; error: string };

type Media = InboundMessage["media"][number];

export function factsOf(message: Message): DiscordMessageFacts {
  const channel = message.channel;
  const kind =
    channel.type === ChannelType.DM
      ? "dm"
      : channel.type === ChannelType.GroupDM
        ? "group-dm"
        : channel.isThread()
          ? "thread"
          : "guild";
  return {
    id: message.id,
    content: message.content,
    authorId: message.author.id,
    authorIsBot: message.author.bot || message.webhookId !== null,
    authorName: message.member?.displayName ?? message.author.globalName ?? message.author.username,
    system: message.system,
    channelId: message.channelId,
    kind,
    parentId: channel.isThread() ? (channel.parentId ?? undefined) : undefined,
    mentionedUserIds: [...message.mentions.users.keys()],
    repliedUserId: message.mentions.repliedUser?.id,
    attachments: [...message.attachments.values()].map((a) => ({
      name: a.name ?? undefined,
      contentType: a.contentType ?? undefined,
      url: a.url,
      size: a.size,
      ...(a.width ? { width: a.width } : {}),
      ...(a.height ? { height: a.height } : {}),
      ...(a.duration !== null && a.duration !== undefined ? { durationSeconds: a.duration } : {}),
    })),
    voice: message.flags.has(MessageFlags.IsVoiceMessage),
    stickerCount: message.stickers.size,
    createdTimestamp: message.createdTimestamp,
  };
}

/**
 * One MESSAGE_CREATE → a validated InboundMessage, or the reason it is not one.
 * - DMs are `direct` with the user as peer; guild channels are `channel`; a thread message
 *   is `channel` on its parent (`peerId` = `parentPeerId` = parent id) with `threadId` = the
 *   thread's channel id, so the router keys it `<channel key>:thread:<threadId>`.
 * - `<@id>` / `<@!id>` of the bot is a mention; a leading one (the way people address a bot)
 *   is removed from the text so `/status` after it still parses as a command. A reply to the
 *   bot is `replyToBot` (Discord also lists the replied-to user in `mentions` when the reply
 *   pings; that alone is not a mention).
 * - Own messages, other bots and webhooks, system messages and empty messages are ignored.
 */
export function discordMessageToInbound(
  facts: DiscordMessageFacts,
  ctx: DiscordInboundContext,
): InboundResult {
  if (facts.authorId === ctx.botUserId) return { kind: "ignored", reason: "own message" };
  if (facts.authorIsBot) return { kind: "ignored", reason: "bot or webhook message" };
  if (facts.system) return { kind: "ignored", reason: "system message" };

  const media = mediaOf(facts);
  const mention = mentionOf(facts, ctx.botUserId);
  if (!mention.text.trim() && media.length === 0) return { kind: "ignored", reason: "empty message" };

  const thread = facts.kind === "thread" ? facts.parentId : undefined;
  if (facts.kind === "thread" && !thread)
    return { kind: "invalid", error: "discord inbound: thread without parent" };
  const chatType = facts.kind === "dm" ? "direct" : facts.kind === "group-dm" ? "group" : "channel";
  const candidate = {
    channel: "discord",
    accountId: ctx.accountId,
    chatType,
    peerId: facts.kind === "dm" ? facts.authorId : (thread ?? facts.channelId),
    ...(thread ? { parentPeerId: thread, threadId: facts.channelId } : {}),
    senderId: facts.authorId,
    ...(facts.authorName ? { senderName: facts.authorName } : {}),
    text: mention.text,
    messageId: facts.id,
    wasMentioned: mention.mentioned,
    replyToBot: facts.repliedUserId === ctx.botUserId,
    media,
    timestamp: facts.createdTimestamp,
  };
  const parsed = inboundMessageSchema.safeParse(candidate);
  if (!parsed.success)
    return { kind: "invalid", error: formatIssues(parsed.error.issues, "discord inbound: ") };
  return { kind: "message", message: parsed.data, facts };
}

function mentionOf(facts: DiscordMessageFacts, botId: string): { mentioned: boolean; text: string } {
  const token = new RegExp(`<@!?${botId}>`);
  const inText = token.test(facts.content);
  // The replied-to author is listed in `mentions` when the reply pings; count it only with a real mention.
  const listed = facts.mentionedUserIds.includes(botId) && facts.repliedUserId !== botId;
  const leading = new RegExp(`^\\s*<@!?${botId}>[\\s,:]*`);
  return { mentioned: inText || listed, text: facts.content.replace(leading, "") };
}

function mediaOf(facts: DiscordMessageFacts): Media[] {
  const media: Media[] = facts.attachments.map((a) => {
    const kind = a.contentType?.startsWith("image/")
      ? "image"
      : a.contentType?.startsWith("audio/")
        ? "audio"
        : a.contentType?.startsWith("video/")
          ? "video"
          : "file";
    return a.name ? { kind, name: a.name } : { kind };
  });
  for (let i = 0; i < facts.stickerCount; i++) media.push({ kind: "sticker" });
  return media;
}
