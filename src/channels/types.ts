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
  /**
   * The message's attachments after the media sink took them (API.md §8.1): stored parts with
   * `mediaId`s, or `media_note`s saying why one could not be taken. Never bytes.
   */
  parts: z.array(z.lazy(() => mediaPartSchema)).optional(),
  timestamp: z.number().optional(),
});

export type InboundMessage = z.infer<typeof inboundMessageSchema>;

// ── Media (API.md §8.1–8.2) ─────────────────────────────────────────────────────────────────

const mediaId = z.string().regex(/^sha256:[0-9a-f]{64}$/, "mediaId must be sha256:<64 hex>");
const mimeType = z.string().min(1).max(255);
const bytes = z.number().int().nonnegative();

/** One stored attachment of a user line, or a note on one that could not be taken. No data. */
export const mediaPartSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("image"),
    mediaId,
    mimeType,
    bytes,
    width: z.number().int().positive().optional(),
    height: z.number().int().positive().optional(),
    name: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal("audio"),
    mediaId,
    mimeType,
    bytes,
    durationSeconds: z.number().nonnegative().optional(),
    voice: z.boolean(),
    transcript: z.string().optional(),
    name: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal("video"),
    mediaId,
    mimeType,
    bytes,
    durationSeconds: z.number().nonnegative().optional(),
    name: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal("file"),
    mediaId,
    mimeType,
    bytes,
    name: z.string(),
    extracted: z.strictObject({ chars: z.number().int().nonnegative(), truncated: z.boolean() }).optional(),
  }),
  z.strictObject({
    type: z.literal("media_note"),
    name: z.string().optional(),
    mimeType: z.string().optional(),
    bytes: bytes.optional(),
    reason: z.enum([
      "too_large",
      "unsupported",
      "download_failed",
      "transcription_failed",
      "extraction_failed",
    ]),
  }),
]);

export type MediaPart = z.infer<typeof mediaPartSchema>;

/**
 * One attachment as the adapter sees it on the platform, before anything is downloaded. Sizes and
 * types are what the platform (or the sender) claims; the sink checks them, sniffs the bytes and
 * caps the download whatever they say.
 */
export interface InboundAttachment {
  kind: "image" | "audio" | "video" | "file" | "sticker";
  /** A voice note (Telegram voice, WhatsApp ptt, Discord voice message), not an audio file. */
  voice?: boolean;
  mimeType?: string;
  name?: string;
  /** Declared size: over the limit means nothing is fetched. */
  bytes?: number;
  durationSeconds?: number;
  width?: number;
  height?: number;
  /** Opens the download through the platform SDK's own call. The sink aborts `signal` past its caps. */
  open(signal: AbortSignal): Promise<AsyncIterable<Uint8Array>>;
}

/**
 * Where an adapter hands its attachments (wired in by the app; adapters never import src/media).
 * Resolves to one part per attachment, in order; never throws (a failure is a `media_note`).
 * `maxBytes` is the channel's `mediaMaxMb` in bytes.
 */
export interface MediaSink {
  take(
    attachments: readonly InboundAttachment[],
    opts: { channel: string; accountId: string; maxBytes: number; signal?: AbortSignal },
  ): Promise<MediaPart[]>;
  /**
   * Files already in the store (the web chat uploads through `POST /media` first) as parts, kind
   * from the stored type; `name` is cleaned. An unknown or pruned id throws INVALID_PARAMS naming
   * `<field>[i].mediaId`.
   */
  resolve?(
    attachments: ReadonlyArray<{ mediaId: string; name?: string }>,
    field: string,
  ): Promise<MediaPart[]>;
}

/** A file to send, resolved from the media store by delivery just before `send`. */
export interface OutboundAttachment {
  mediaId: string;
  kind: "image" | "audio" | "video" | "file";
  mimeType: string;
  name: string;
  bytes: number;
  /** Send as a native voice note (OGG/Opus on Telegram and WhatsApp) where the platform has one. */
  voice?: boolean;
  /** A fresh stream of the bytes each call. */
  open(): Promise<NodeJS.ReadableStream>;
  /** The whole file in memory, for SDKs that take only a buffer. */
  read(): Promise<Buffer>;
}

// ── Actions: buttons out, presses in (API.md §8.3) ─────────────────────────────────────────

/** A button under a message. `id` comes back in the press; it is opaque to the adapter (≤ 64 bytes). */
export interface OutboundAction {
  id: string;
  label: string;
  style?: "primary" | "success" | "danger";
}

/** A press of one of this adapter's buttons, as the platform reported it (validated by the adapter). */
export const inboundActionSchema = z.strictObject({
  channel: z.string().min(1),
  accountId: z.string().min(1),
  chatType: z.enum(["direct", "group", "channel"]),
  peerId: z.string().min(1),
  threadId: z.string().optional(),
  topicId: z.string().optional(),
  senderId: z.string().min(1),
  senderName: z.string().optional(),
  /** The message that carried the buttons. */
  messageId: z.string().min(1),
  /** The pressed button's `OutboundAction.id`, as the platform returned it (untrusted). */
  actionId: z.string().min(1).max(256),
});

export type InboundAction = z.infer<typeof inboundActionSchema>;

/** What the gateway answers a press; the adapter shows `notice` to the presser only, where it can. */
export type ActionHandler = (press: InboundAction) => Promise<{ notice?: string }>;

/**
 * The fenced lease this gateway holds on the account's live connection (many gateways, API.md
 * §8.5), handed over by the app when the store is Redis. `valid()` is a local check (the lease's
 * end is kept on the monotonic clock from the start of its last renewal), so it costs no round
 * trip: an adapter asks it before an acknowledgement or send that would conflict with another
 * holder (Telegram's offset confirmation, a Slack envelope ack, a WhatsApp socket open).
 */
export interface AccountLease {
  /** The fencing token: grows with every new holder of this account. */
  readonly token: number;
  /** True while this gateway holds the lease and its time has not run out. */
  valid(): boolean;
}

/** What the app hands an adapter at start, beside its inbound handler. All optional. */
export interface AdapterContext {
  media?: MediaSink;
  onAction?: ActionHandler;
  /** Present when the account runs under a lease (redis store, a live connection). */
  lease?: AccountLease;
}

/**
 * Opaque per-account state a channel keeps across restarts and gateways (WhatsApp's
 * linked-device credentials and signal keys), as text under string keys. The app hands one in
 * for redis storage (kept under the store prefix, so any gateway can take the connection over);
 * without one the adapter keeps its own files. Adapters never import the store.
 */
export interface AuthStateStore {
  /** The stored text of each key present (absent keys are left out). */
  get(keys: readonly string[]): Promise<Map<string, string>>;
  /** Writes (text) and deletes (null) in one atomic step: all of the batch or none of it. */
  set(entries: Readonly<Record<string, string | null>>): Promise<void>;
  /** True when nothing is stored for this account. */
  isEmpty(): Promise<boolean>;
  /** Removes everything stored for this account (logout). */
  clear(): Promise<void>;
}

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
  /** Files to send, `text` as their caption (split past `captionLimit`). Needs `capabilities.media`. */
  attachments?: OutboundAttachment[];
  /** Buttons under the message (`capabilities.buttons`); without them the text must say what to reply. */
  actions?: OutboundAction[];
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
  /** Sends `OutboundMessage.attachments`; `captionLimit` is the longest caption the platform takes. */
  media?: { captionLimit: number; voiceNotes: boolean };
  /** Native buttons (`OutboundMessage.actions`) whose presses reach `AdapterContext.onAction`. */
  buttons?: boolean;
}

export type ChannelStatus = "stopped" | "starting" | "connected" | "reconnecting" | "error" | "needs-login";

/** Resolves when the inbound message is durably accepted (or deliberately dropped). */
export type InboundHandler = (msg: InboundMessage) => Promise<void>;

export interface ChannelAdapter {
  /** Channel name: telegram, slack, discord, whatsapp, webchat. */
  readonly channel: string;
  readonly accountId: string;
  readonly capabilities: ChannelCapabilities;
  /** Idempotent. `ctx` carries the media sink and the press handler (absent: no media, no buttons). */
  start(onInbound: InboundHandler, ctx?: AdapterContext): Promise<void>;
  /** Idempotent; waits for in-flight handlers and saves positions. */
  stop(): Promise<void>;
  /** Returns the platform message id(s). Throws SwitchboardError (RATE_LIMITED with retryAfterMs…). */
  send(msg: OutboundMessage): Promise<{ messageIds: string[] }>;
  sendTyping?(to: string, threadId?: string): Promise<void>;
  /** Ends a typing indicator that does not expire by itself (WhatsApp `paused`). */
  stopTyping?(to: string, threadId?: string): Promise<void>;
  /**
   * Replaces a sent message's text (and, where given, its buttons: `actions: []` removes them).
   * An unchanged text is a success (Telegram's "message is not
   * modified"). Throws RATE_LIMITED with retryAfterMs when the platform says to slow down.
   */
  edit?(msg: EditMessage): Promise<void>;
  /** Creates a thread under `to` and returns its id (thread-bound sub-agents). */
  createThread?(to: string, title: string): Promise<{ threadId: string }>;
  /** `qr`: a device-link code to scan while `needs-login` (WhatsApp); health and the dashboard show it. */
  status(): { state: ChannelStatus; detail?: string; qr?: string };
  /** Checks the credentials with the platform's identity method (getMe, auth.test, users/@me) without starting. */
  probe?(): Promise<{ ok: boolean; detail: string }>;
  /**
   * Whether this account keeps a live connection that only one process may hold (long polling,
   * a gateway socket, Socket Mode, a WhatsApp socket); with many gateways it runs under a lease.
   * Absent or false: every gateway may run it (webhooks, the web chat).
   */
  readonly exclusive?: boolean;
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
