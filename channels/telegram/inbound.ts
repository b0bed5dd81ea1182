import type { Message, Update } from "grammy/types";
import {
  type InboundAction,
  type InboundMessage,
  inboundActionSchema,
  inboundMessageSchema,
} from "../../src/channels/types.js";
import { formatIssues } from "../../src/errors.js";

/** Facts about the bot that normalisation needs (from getMe). */
export interface TelegramInboundContext {
  accountId: string;
  botId: number;
  botUsername: string;
}

export type InboundResult =
  | { kind: "message"; message: InboundMessage }
  | { kind: "ignored"; reason: string }
  | { kind: "invalid"; error: string };

type Media = InboundMessage["media"][number];

/**
 * One Telegram update → a validated InboundMessage, or the reason it is not one. Handles
 * `message` and `channel_post`; everything else (edits, callbacks, reactions) is ignored, as
 * are the bot's own messages and service messages (joins, pins, topic events) that carry
 * neither text nor media.
 */
export function telegramUpdateToInbound(update: Update, ctx: TelegramInboundContext): InboundResult {
  const msg = update.message ?? update.channel_post;
  if (!msg) return { kind: "ignored", reason: "not a message update" };
  if (msg.from?.id === ctx.botId) return { kind: "ignored", reason: "own message" };

  const media = mediaOf(msg);
  const rawText = msg.text ?? msg.caption ?? "";
  if (!rawText && media.length === 0) return { kind: "ignored", reason: "service message" };

  const mention = mentionOf(msg, rawText, ctx);
  const chatType = msg.chat.type === "private" ? "direct" : msg.chat.type === "channel" ? "channel" : "group";
  const reply = msg.reply_to_message;
  // In forum topics every message "replies" to the topic's creation message; that is not a reply to the bot.
  const replyToBot = reply?.from?.id === ctx.botId && reply.forum_topic_created === undefined;

  const sender = senderOf(msg);
  const candidate = {
    channel: "telegram",
    accountId: ctx.accountId,
    chatType,
    peerId: String(msg.chat.id),
    ...(msg.is_topic_message && msg.message_thread_id !== undefined
      ? { topicId: String(msg.message_thread_id) }
      : {}),
    senderId: sender.id,
    ...(sender.name ? { senderName: sender.name } : {}),
    text: mention.text,
    messageId: String(msg.message_id),
    wasMentioned: mention.mentioned,
    replyToBot,
    media,
    timestamp: msg.date * 1000,
  };
  const parsed = inboundMessageSchema.safeParse(candidate);
  if (!parsed.success)
    return { kind: "invalid", error: formatIssues(parsed.error.issues, "telegram inbound: ") };
  return { kind: "message", message: parsed.data };
}

function senderOf(msg: Message): { id: string; name?: string } {
  // Channel posts and anonymous group admins speak as a chat, not a user.
  if (msg.sender_chat)
    return { id: String(msg.sender_chat.id), name: msg.author_signature ?? chatTitle(msg.sender_chat) };
  if (msg.from) {
    const name = [msg.from.first_name, msg.from.last_name].filter(Boolean).join(" ") || msg.from.username;
    return { id: String(msg.from.id), ...(name ? { name } : {}) };
  }
  return { id: String(msg.chat.id), name: chatTitle(msg.chat) };
}

function chatTitle(chat: Message["chat"]): string | undefined {
  return "title" in chat ? chat.title : undefined;
}

/**
 * `@botusername` mention entities, text mentions of the bot's user, and commands addressed
 * to the bot (`/status@bot`). The `@bot` suffix of a leading command is removed so command
 * parsing downstream sees `/status`.
 */
function mentionOf(
  msg: Message,
  text: string,
  ctx: TelegramInboundContext,
): { mentioned: boolean; text: string } {
  const handle = `@${ctx.botUsername}`.toLowerCase();
  let mentioned = false;
  let out = text;
  for (const e of msg.entities ?? msg.caption_entities ?? []) {
    const slice = text.slice(e.offset, e.offset + e.length).toLowerCase();
    if (e.type === "mention" && slice === handle) mentioned = true;
    else if (e.type === "text_mention" && e.user.id === ctx.botId) mentioned = true;
    else if (e.type === "bot_command" && slice.endsWith(handle)) {
      mentioned = true;
      if (e.offset === 0) out = text.slice(0, e.length - handle.length) + text.slice(e.length);
    }
  }
  return { mentioned, text: out };
}

function mediaOf(msg: Message): Media[] {
  const media: Media[] = [];
  if (msg.photo) media.push({ kind: "image" });
  if (msg.sticker) media.push({ kind: "sticker" });
  if (msg.voice) media.push({ kind: "audio" });
  if (msg.audio) media.push(named("audio", msg.audio.file_name));
  if (msg.video) media.push(named("video", msg.video.file_name));
  if (msg.video_note) media.push({ kind: "video" });
  // An animation also carries `document`; report it once, as video.
  if (msg.animation) media.push(named("video", msg.animation.file_name));
  else if (msg.document) media.push(named("file", msg.document.file_name));
  return media;
}

function named(kind: Media["kind"], name: string | undefined): Media {
  return name ? { kind, name } : { kind };
}

/**
 * A `callback_query` (a press of an inline keyboard button) → a validated InboundAction, or why
 * not: the press must carry data and the message it came from (an inline-mode message has no chat
 * and is refused).
 */
export function telegramCallbackToAction(
  update: Update,
  accountId: string,
): { ok: true; action: InboundAction } | { ok: false; error: string } {
  const q = update.callback_query;
  if (!q) return { ok: false, error: "not a callback query" };
  const msg = q.message;
  if (!msg || !("chat" in msg))
    return { ok: false, error: "callback_query.message: missing (inline message)" };
  const chatType = msg.chat.type === "private" ? "direct" : msg.chat.type === "channel" ? "channel" : "group";
  const topic =
    "message_thread_id" in msg && msg.message_thread_id !== undefined
      ? String(msg.message_thread_id)
      : undefined;
  const parsed = inboundActionSchema.safeParse({
    channel: "telegram",
    accountId,
    chatType,
    peerId: String(msg.chat.id),
    ...(topic ? { topicId: topic } : {}),
    senderId: String(q.from.id),
    ...(q.from.username || q.from.first_name ? { senderName: q.from.username ?? q.from.first_name } : {}),
    messageId: String(msg.message_id),
    actionId: q.data ?? "",
  });
  if (!parsed.success) return { ok: false, error: formatIssues(parsed.error.issues, "callback_query.") };
  return { ok: true, action: parsed.data };
}
