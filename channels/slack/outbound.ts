import type { webApi } from "@slack/bolt";
import { escapeSlack } from "../../src/channels/kit/format/index.js";
import { messagesOf } from "../../src/channels/kit/text.js";
import type { EditMessage, OutboundMessage } from "../../src/channels/types.js";
import { slackBlocks } from "./actions.js";
import { toSwitchboardError } from "./errors.js";

type WebClient = webApi.WebClient;

/**
 * chat.postMessage per chunk. `native` text is mrkdwn already; `plain` text is escaped
 * (`& < >` are control characters in every Slack text field) and sent with mrkdwn off.
 * `threadId` is the root's ts. Slack has no reply-to outside threads, so replyToMessageId is
 * not used. A text over the limit is split here rather than truncated.
 */
export async function postSlackMessage(
  client: WebClient,
  msg: OutboundMessage,
  textLimit: number,
): Promise<string[]> {
  const chunks = messagesOf(msg.text, textLimit);
  const ids: string[] = [];
  for (const [i, chunk] of chunks.entries()) {
    const text = msg.format === "native" ? chunk : escapeSlack(chunk);
    try {
      const res = await client.chat.postMessage({
        channel: msg.to,
        text,
        mrkdwn: msg.format === "native",
        // Buttons go under the last chunk: a section with the text, then an actions block.
        ...(i === chunks.length - 1 && msg.actions?.length
          ? { blocks: slackBlocks(text, msg.format === "native", msg.actions) }
          : {}),
        ...(msg.threadId ? { thread_ts: msg.threadId } : {}),
      });
      if (!res.ts) throw new Error("chat.postMessage returned no ts");
      ids.push(res.ts);
    } catch (err) {
      throw toSwitchboardError(err, "chat.postMessage");
    }
  }
  return ids;
}

/** `chat.update` of a message the bot posted (streaming previews); `channel` is a conversation id. */
export async function updateSlackMessage(
  client: WebClient,
  channel: string,
  msg: EditMessage,
  textLimit: number,
): Promise<void> {
  const text = (msg.format === "native" ? msg.text : escapeSlack(msg.text)).slice(0, textLimit);
  try {
    await client.chat.update({
      channel,
      ts: msg.messageId,
      text,
      // `actions: []` leaves the section alone (the buttons are removed); without actions the
      // blocks are left as they are.
      ...(msg.actions ? { blocks: slackBlocks(text, msg.format === "native", msg.actions) } : {}),
    });
  } catch (err) {
    throw toSwitchboardError(err, "chat.update");
  }
}

/**
 * Posts `title` as a new top-level message and returns its ts: in Slack a thread is simply
 * the replies under a message, so that ts is the thread id.
 */
export async function createSlackThread(
  client: WebClient,
  to: string,
  title: string,
): Promise<{ threadId: string }> {
  try {
    const res = await client.chat.postMessage({
      channel: to,
      text: escapeSlack(title.trim()) || "Thread",
      mrkdwn: false,
    });
    if (!res.ts) throw new Error("chat.postMessage returned no ts");
    return { threadId: res.ts };
  } catch (err) {
    throw toSwitchboardError(err, "chat.postMessage");
  }
}

/**
 * The "is typing…" status of an assistant thread (needs `assistant:write`; only works in
 * Slack's assistant threads). Best effort: failures are reported to the caller as false.
 */
export async function setSlackThreadStatus(
  client: WebClient,
  channelId: string,
  threadTs: string,
  status: string,
): Promise<boolean> {
  try {
    await client.assistant.threads.setStatus({ channel_id: channelId, thread_ts: threadTs, status });
    return true;
  } catch {
    return false;
  }
}
