import type { WAMessage } from "@whiskeysockets/baileys";
import { z } from "zod";
import type { AuthStateStore } from "../../src/channels/types.js";
import type { Logger } from "../../src/log.js";
import type { WhatsAppMediaContent } from "./media.js";

/**
 * One linked WhatsApp account (a phone number linked as a WhatsApp Web device). Same fields
 * as `channels.whatsapp.accounts.<id>` in the config file plus the account id; the tuning
 * fields have defaults and are not user-facing.
 */
export const whatsappChannelConfigSchema = z.strictObject({
  accountId: z.string().min(1),
  /** Largest attachment taken, MB (`channels.whatsapp.mediaMaxMb`); larger ones are never fetched. */
  mediaMaxMb: z.number().positive().default(50),
  /**
   * Baileys auth state folder (creds.json + signal keys), created with mode 0700. The gateway
   * passes it resolved; default `<stateDir>/whatsapp/<accountId>`.
   */
  authDir: z.string().min(1).optional(),
  /** First reconnect delay after a dropped connection, doubled per attempt, ms. */
  reconnectBaseMs: z.number().int().min(0).default(2000),
  /** Reconnect delay ceiling, ms. */
  reconnectMaxMs: z.number().int().min(0).default(60_000),
  /**
   * start() resolves once the first connection attempt has an outcome (open, QR, closed) or
   * after this long, whichever is first; connecting continues in the background, ms.
   */
  startTimeoutMs: z.number().int().min(0).default(20_000),
  /** WhatsApp's `rate-overlimit` carries no retry-after; this is the wait handed to delivery, ms. */
  rateLimitRetryAfterMs: z.number().int().min(0).default(10_000),
  /** Waits (ms) before re-trying a failed inbound handler; after the last one the message is dropped. */
  inboundRetryDelaysMs: z.array(z.number().int().min(0)).default([250, 1000, 4000]),
});

/** What callers pass (defaults optional). */
export type WhatsAppChannelConfig = z.input<typeof whatsappChannelConfigSchema>;
/** After validation: every field resolved. */
export type ResolvedWhatsAppChannelConfig = z.output<typeof whatsappChannelConfigSchema>;

// ---------------------------------------------------------------------------- socket boundary

/** `connection.update` as far as the adapter reads it (a subset of Baileys' ConnectionState). */
export interface WhatsAppConnectionUpdate {
  connection?: "open" | "connecting" | "close";
  qr?: string;
  isNewLogin?: boolean;
  /** `error` is a Boom whose `output.statusCode` is a Baileys `DisconnectReason`. */
  lastDisconnect?: { error?: unknown };
}

export interface WhatsAppEvents {
  "connection.update": WhatsAppConnectionUpdate;
  /** `messages` are Baileys WAMessages; they are validated on the way in. */
  "messages.upsert": { messages: readonly unknown[]; type: string };
  "creds.update": unknown;
}

type Listener<K extends keyof WhatsAppEvents> = (arg: WhatsAppEvents[K]) => void;

/**
 * The part of a Baileys `WASocket` the adapter uses. Tests inject a fake with the same shape;
 * production uses `makeWASocket` (see socket.ts). Deliberately outside: media download,
 * group metadata, receipts, history sync.
 */
export interface WhatsAppSocket {
  ev: {
    on<K extends keyof WhatsAppEvents>(event: K, listener: Listener<K>): void;
    off<K extends keyof WhatsAppEvents>(event: K, listener: Listener<K>): void;
  };
  /** The linked account once connected: `id` is `<pn>:<device>@s.whatsapp.net`, `lid` `<lid>:<device>@lid`. */
  user?: { id: string; lid?: string | undefined } | undefined;
  sendMessage(
    jid: string,
    content: { text: string } | WhatsAppMediaContent,
  ): Promise<{ key?: { id?: string | null } } | undefined>;
  /** Asks the phone to re-upload media the CDN expired (Baileys `updateMediaMessage`). */
  updateMediaMessage?(msg: WAMessage): Promise<WAMessage>;
  sendPresenceUpdate(type: "composing" | "paused", jid: string): Promise<void>;
  /** Closes the connection; Baileys then emits `connection.update` with `close`. */
  end(error: Error | undefined): unknown;
  /** LID → phone-number lookups from Baileys' local mapping store. */
  signalRepository?: { lidMapping?: { getPNForLID(lid: string): Promise<string | null> } };
}

/**
 * Creates one connected-or-connecting socket over the auth state in `authStore` when given
 * (redis storage), else in `authDir`.
 */
export type WhatsAppSocketFactory = (opts: {
  authDir: string;
  logger: Logger;
  authStore?: AuthStateStore;
}) => Promise<{ socket: WhatsAppSocket; saveCreds: () => Promise<void> }>;

/** Timer seam so tests can drive reconnect back-off without waiting. */
export interface WhatsAppTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface WhatsAppChannelDeps {
  logger: Logger;
  /** Base for the default auth dir (`<stateDir>/whatsapp/<accountId>`) when `authDir` is not set. */
  stateDir?: string;
  /**
   * Where the auth state lives instead of `authDir` (the app passes Redis with storage.driver
   * "redis"). An existing `authDir` is copied into it once, when it holds nothing yet.
   */
  authStore?: AuthStateStore;
  /** Default: Baileys `makeWASocket` over `useMultiFileAuthState(authDir)`. */
  socketFactory?: WhatsAppSocketFactory;
  timers?: WhatsAppTimers;
  /** Shows a login QR to the operator. Default: rendered on stderr (raw string + instructions without a renderer). */
  printQr?: (qr: string) => void | Promise<void>;
}
