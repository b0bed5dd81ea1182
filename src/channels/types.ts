import { z } from "zod";

/**
 * The channel adapter contract. An adapter owns one platform SDK and knows nothing about agents
 * or sessions: it turns platform events into a validated `InboundMessage` and sends
 * `OutboundMessage`s. Optional members are capabilities; delivery checks them before use.
 */

export const inboundMessageSchema = z.strictObject({
  channel: z.string().min(1),
  accountId: z.string().min(1),
  chatType: z.enum(["direct", "group", "channel"]),
  /** Chat id: the DM peer (user) for direct chats, the group/channel id otherwise. */
  peerId: z.string().min(1),
  /** Parent chat of a thread when the platform models threads as chats (Discord). */
  parentPeerId: z.string().optional(),
  threadId: z.string().optional(),
  /** Telegram forum topic. */
  topicId: z.string().optional(),
  senderId: z.string().min(1),
  senderName: z.string().optional(),
  text: z.string(),
  messageId: z.string().min(1),
  wasMentioned: z.boolean().default(false),
  replyToBot: z.boolean().default(false),
  media: z
    .array(
      z.strictObject({
        kind: z.enum(["image", "audio", "video", "file", "sticker"]),
        name: z.string().optional(),
      }),
    )
    .default([]),
  timestamp: z.number().optional(),
});

export type InboundMessage = z.infer<typeof inboundMessageSchema>;

export interface OutboundMessage {
  accountId: string;
  /** Chat id to post into. */
  to: string;
  threadId?: string;
  /** Already rendered for this channel's dialect and chunked under `textLimit`. */
  text: string;
  format: "plain" | "native";
  replyToMessageId?: string;
  /** A failed turn's short line to the person (the web chat shows it as an error with a retry). */
  kind?: "reply" | "failure";
}

/** Replaces the text of a message this adapter sent (streaming previews). */
export interface EditMessage extends OutboundMessage {
  messageId: string;
}

export interface ChannelCapabilities {
  textLimit: number;
  threads: boolean;
  typing: boolean;
  markdown: "telegram-html" | "slack-mrkdwn" | "discord" | "whatsapp" | "markdown" | "plain";
  createThread: boolean;
  /**
   * Streaming previews (with `edit`): the least time between two edits of one message, in
   * direct chats and in groups, from the platform's rate limits.
   */
  streaming?: { editIntervalMs: number; groupEditIntervalMs: number };
}

export type ChannelStatus = "stopped" | "starting" | "connected" | "reconnecting" | "error" | "needs-login";

/** Resolves when the inbound message is durably accepted (or deliberately dropped). */
export type InboundHandler = (msg: InboundMessage) => Promise<void>;

export interface ChannelAdapter {
  /** Channel name: telegram, slack, discord, whatsapp, webchat. */
  readonly channel: string;
  readonly accountId: string;
  readonly capabilities: ChannelCapabilities;
  /** Idempotent. */
  start(onInbound: InboundHandler): Promise<void>;
  /** Idempotent; waits for in-flight handlers and saves positions. */
  stop(): Promise<void>;
  /** Returns the platform message id(s). Throws SwitchboardError (RATE_LIMITED with retryAfterMs…). */
  send(msg: OutboundMessage): Promise<{ messageIds: string[] }>;
  sendTyping?(to: string, threadId?: string): Promise<void>;
  /** Ends a typing indicator that does not expire by itself (WhatsApp `paused`). */
  stopTyping?(to: string, threadId?: string): Promise<void>;
  /**
   * Replaces a sent message's text. An unchanged text is a success (Telegram's "message is not
   * modified"). Throws RATE_LIMITED with retryAfterMs when the platform says to slow down.
   */
  edit?(msg: EditMessage): Promise<void>;
  /** Creates a thread under `to` and returns its id (thread-bound sub-agents). */
  createThread?(to: string, title: string): Promise<{ threadId: string }>;
  /** `qr`: a device-link code to scan while `needs-login` (WhatsApp); health and the dashboard show it. */
  status(): { state: ChannelStatus; detail?: string; qr?: string };
  /** Checks the credentials with the platform's identity method (getMe, auth.test, users/@me) without starting. */
  probe?(): Promise<{ ok: boolean; detail: string }>;
}

/** Request headers as Node and fastify hand them over (names lower-case). */
export type WebhookHeaders = Record<string, string | string[] | undefined>;

/**
 * What a channel's webhook handler (Telegram webhook mode, Slack HTTP mode) answers; the
 * gateway writes it out unchanged. 2xx only after the inbound handler durably accepted the
 * event, so a platform retry is the recovery path for everything else.
 */
export interface WebhookResponse {
  status: number;
  body?: unknown;
}
