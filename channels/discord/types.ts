import { z } from "zod";
import type { Logger } from "../../src/log.js";

/**
 * One Discord bot (one token). Same fields as `channels.discord.accounts.<id>` in the config
 * file plus the account id; the tuning fields have defaults and are not user-facing.
 */
export const discordChannelConfigSchema = z.strictObject({
  accountId: z.string().min(1),
  /** Largest attachment taken, MB (`channels.discord.mediaMaxMb`); larger ones are never fetched. */
  mediaMaxMb: z.number().positive().default(25),
  /** Bot token from the Developer Portal (Bot → Reset Token). A leading "Bot " is tolerated. */
  token: z
    .string()
    .min(1)
    .transform((t) => t.replace(/^Bot\s+/i, "")),
  /** REST base URL up to and including `/api` (the `/v10` is added). Default https://discord.com/api. */
  apiUrl: z
    .string()
    .url()
    .transform((u) => u.replace(/\/+$/, ""))
    .optional(),
  /**
   * Gateway WebSocket URL (`ws://` or `wss://`). Default: whatever `GET /gateway/bot` answers.
   * When set, identify and resume both go here (for a gateway proxy).
   */
  gatewayUrl: z
    .string()
    .regex(/^wss?:\/\/\S+$/, "must be a ws:// or wss:// URL")
    .transform((u) => u.replace(/\/+$/, ""))
    .optional(),
  /**
   * Rate limits up to this long are waited out inside the SDK; longer ones fail the send with
   * RATE_LIMITED (retryAfterMs) so delivery can reschedule it, ms.
   */
  maxRateLimitWaitMs: z.number().int().min(0).default(1000),
  /** Per REST request, ms. */
  requestTimeoutMs: z.number().int().min(1000).default(15_000),
  /** Send replies with SUPPRESS_EMBEDS so links do not unfurl into large previews. */
  suppressEmbeds: z.boolean().default(true),
  /**
   * Waits (ms) before re-trying an inbound handler that failed; after the last one the message
   * is dropped with an error log (the gateway never redelivers).
   */
  inboundRetryDelaysMs: z.array(z.number().int().min(0)).default([250, 1000, 4000]),
  /**
   * How long a button press waits for the gateway's notice before the interaction is deferred
   * (Discord wants an acknowledgement within 3 s; a deferred reply is edited to the notice), ms.
   */
  pressAckWithinMs: z.number().int().min(0).max(2500).default(2000),
  /** How many user → DM channel ids are remembered (avoids a REST call per DM reply). */
  dmCacheSize: z.number().int().min(10).default(10_000),
});

/** What callers pass (defaults optional). */
export type DiscordChannelConfig = z.input<typeof discordChannelConfigSchema>;
/** After validation: every field resolved. */
export type ResolvedDiscordChannelConfig = z.output<typeof discordChannelConfigSchema>;

export interface DiscordChannelDeps {
  logger: Logger;
}
