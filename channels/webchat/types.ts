import { z } from "zod";
import type { MediaPart } from "../../src/channels/types.js";
import type { Logger } from "../../src/log.js";

/** The built-in web chat: one account, served on the gateway port (`/` and `/webchat/ws`). */
export const webchatChannelConfigSchema = z.strictObject({
  accountId: z.string().min(1).default("default"),
  /** A line shown above the chat (e.g. that the scripted demo model answers). */
  notice: z.string().optional(),
  /** Messages kept for a visitor who is not connected (delivered on reconnect). */
  backlogPerVisitor: z.number().int().min(0).max(1000).default(50),
  /** Largest accepted message, characters. */
  maxMessageChars: z.number().int().min(1).default(32_000),
});

export type WebchatChannelConfig = z.input<typeof webchatChannelConfigSchema>;
export type ResolvedWebchatChannelConfig = z.output<typeof webchatChannelConfigSchema>;

/** One line of the visitor's conversation, as the page shows it on open and on reconnect. */
export interface WebchatHistoryItem {
  id: string;
  role: "user" | "assistant";
  text: string;
  at: number;
  /** A user line's files (ids and metadata; the page fetches the bytes from `GET /media/<id>`). */
  parts?: MediaPart[];
}

export interface WebchatChannelDeps {
  logger: Logger;
  /** The visitor's session, newest last (the gateway reads it from the store). */
  history?: (visitorId: string) => Promise<WebchatHistoryItem[]>;
}

/** The part of a WebSocket the adapter uses (the gateway passes `ws` sockets). */
export interface WebchatSocket {
  readonly readyState: number;
  readonly OPEN: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  on(event: "message", listener: (data: Buffer | ArrayBuffer | Buffer[]) => void): unknown;
  on(event: "close", listener: () => void): unknown;
}

/** Frames the browser sends. */
export const clientFrameSchema = z.discriminatedUnion("type", [
  /** A message: text, files uploaded first through `POST /media`, or both (one of them required). */
  z.strictObject({
    type: z.literal("message"),
    id: z.string().min(1).max(100),
    text: z.string(),
    attachments: z
      .array(
        z.strictObject({
          mediaId: z.string().regex(/^sha256:[0-9a-f]{64}$/, "mediaId must be sha256:<64 hex>"),
          name: z.string().max(1000).optional(),
        }),
      )
      .max(10)
      .optional(),
  }),
  z.strictObject({ type: z.literal("ping") }),
  /** A press of a button under the message `messageId` (the gateway checks it is this visitor's). */
  z.strictObject({
    type: z.literal("action"),
    messageId: z.string().min(1).max(100),
    actionId: z.string().min(1).max(256),
  }),
]);
