import type { Api } from "grammy";
import { GrammyError } from "grammy";
import { telegramHtmlToPlain } from "../../src/channels/kit/format/index.js";
import { messagesOf } from "../../src/channels/kit/text.js";
import type { EditMessage, OutboundAction, OutboundMessage } from "../../src/channels/types.js";
import { InvalidParamsError } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";
import { isEntityParseError, toSwitchboardError } from "./errors.js";

/** Buttons as one inline keyboard row; `callback_data` is the action id (≤ 64 bytes, checked by the API). */
export function inlineKeyboard(actions: readonly OutboundAction[]) {
  return {
    inline_keyboard: actions.length
      ? [actions.map((a) => ({ text: a.label, callback_data: a.id, ...(a.style ? { style: a.style } : {}) }))]
      : [],
  };
}

/** Telegram's General forum topic: sends must omit its id ("thread not found"), chat actions must include it. */
const GENERAL_TOPIC = "1";

/**
 * Sends one OutboundMessage. Text is expected under the limit already (delivery chunks); a
 * longer text is split here rather than truncated. `native` text is Telegram HTML; when
 * Telegram rejects the markup, that chunk is resent as the plain text a reader would see.
 */
export async function sendTelegramMessage(
  api: Api,
  msg: OutboundMessage,
  textLimit: number,
  logger: Logger,
): Promise<string[]> {
  const topic = topicIdOf(msg.threadId);
  const chunks = messagesOf(msg.text, textLimit);
  const ids: string[] = [];
  for (const [i, chunk] of chunks.entries()) {
    const base = {
      ...(topic !== undefined && msg.threadId !== GENERAL_TOPIC ? { message_thread_id: topic } : {}),
      ...(i === chunks.length - 1 && msg.actions?.length
        ? { reply_markup: inlineKeyboard(msg.actions) }
        : {}),
      ...(i === 0 && msg.replyToMessageId
        ? {
            reply_parameters: {
              message_id: messageIdOf(msg.replyToMessageId),
              allow_sending_without_reply: true,
            },
          }
        : {}),
    };
    try {
      const sent = await api.sendMessage(
        msg.to,
        chunk,
        msg.format === "native" ? { ...base, parse_mode: "HTML" } : base,
      );
      ids.push(String(sent.message_id));
    } catch (err) {
      if (msg.format !== "native" || !isEntityParseError(err)) throw toSwitchboardError(err, "sendMessage");
      logger.warn({ to: msg.to }, "telegram rejected the HTML markup; resending as plain text");
      try {
        const sent = await api.sendMessage(msg.to, telegramHtmlToPlain(chunk), base);
        ids.push(String(sent.message_id));
      } catch (err2) {
        throw toSwitchboardError(err2, "sendMessage");
      }
    }
  }
  return ids;
}

/**
 * Replaces a message's text (streaming previews). "message is not modified" is success; markup
 * Telegram rejects is resent as the plain text a reader would see.
 */
export async function editTelegramMessage(api: Api, msg: EditMessage, logger: Logger): Promise<void> {
  const id = messageIdOf(msg.messageId);
  const edit = async (text: string, html: boolean) => {
    try {
      await api.editMessageText(msg.to, id, text, {
        ...(html ? { parse_mode: "HTML" as const } : {}),
        // `actions: []` removes the keyboard (an empty one); without actions it is left as it is
        ...(msg.actions ? { reply_markup: inlineKeyboard(msg.actions) } : {}),
      });
    } catch (err) {
      if (err instanceof GrammyError && /message is not modified/i.test(err.description)) return;
      throw err;
    }
  };
  try {
    await edit(msg.text, msg.format === "native");
  } catch (err) {
    if (msg.format !== "native" || !isEntityParseError(err)) throw toSwitchboardError(err, "editMessageText");
    logger.warn({ to: msg.to }, "telegram rejected the HTML markup of an edit; editing as plain text");
    try {
      await edit(telegramHtmlToPlain(msg.text), false);
    } catch (err2) {
      throw toSwitchboardError(err2, "editMessageText");
    }
  }
}

export async function sendTelegramTyping(api: Api, to: string, threadId?: string): Promise<void> {
  const topic = topicIdOf(threadId);
  try {
    await api.sendChatAction(to, "typing", topic !== undefined ? { message_thread_id: topic } : {});
  } catch (err) {
    throw toSwitchboardError(err, "sendChatAction");
  }
}

/** Forum supergroups only; other chats answer NOT_SUPPORTED. Titles are cut to Telegram's 128. */
export async function createTelegramTopic(
  api: Api,
  to: string,
  title: string,
): Promise<{ threadId: string }> {
  const name = title.trim().slice(0, 128) || "Thread";
  try {
    const topic = await api.createForumTopic(to, name);
    return { threadId: String(topic.message_thread_id) };
  } catch (err) {
    throw toSwitchboardError(err, "createForumTopic");
  }
}

export function topicIdOf(threadId: string | undefined): number | undefined {
  if (threadId === undefined) return undefined;
  if (!/^\d+$/.test(threadId))
    throw new InvalidParamsError(`threadId: telegram topic ids are numeric, got "${threadId}"`);
  return Number(threadId);
}

export function messageIdOf(id: string): number {
  if (!/^\d+$/.test(id))
    throw new InvalidParamsError(`replyToMessageId: telegram message ids are numeric, got "${id}"`);
  return Number(id);
}
