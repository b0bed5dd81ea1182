import { z } from "zod";
import type { Logger } from "../../src/log.js";

/**
 * One Telegram bot account. Same fields as `channels.telegram.accounts.<id>` in the config
 * file plus the account id; the extra tuning fields have defaults and are not user-facing.
 */
export const telegramChannelConfigSchema = z
  .strictObject({
    accountId: z.string().min(1),
    /** Largest attachment taken, MB (`channels.telegram.mediaMaxMb`); larger ones are never fetched. */
    mediaMaxMb: z.number().positive().default(20),
    token: z.string().min(1),
    /** Bot API base URL without trailing slash. Default: https://api.telegram.org (grammY's default). */
    apiRoot: z
      .string()
      .url()
      .transform((u) => u.replace(/\/+$/, ""))
      .optional(),
    mode: z.enum(["polling", "webhook"]).default("polling"),
    /** Required in webhook mode: Telegram echoes it in X-Telegram-Bot-Api-Secret-Token. 1–256 of A-Z a-z 0-9 _ -. */
    webhookSecret: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,256}$/, "must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
      .optional(),
    /** Public URL of `POST /hooks/telegram/<accountId>`; when set, start() registers it with setWebhook. */
    webhookUrl: z.string().url().optional(),
    /** Long-poll wait per getUpdates call, seconds. */
    pollingTimeoutSeconds: z.number().int().min(0).max(50).default(30),
    /**
     * Polling mode: waits (ms) before re-trying an inbound handler that failed; after the last
     * one the update is dropped with an error log. Webhook mode answers 500 instead and lets
     * Telegram redeliver.
     */
    inboundRetryDelaysMs: z.array(z.number().int().min(0)).default([250, 1000, 4000]),
    /** An album (items sharing `media_group_id`) is handed over once no item came for this long, ms. */
    albumQuietMs: z.number().int().min(0).max(10_000).default(800),
    /** …or at the latest this long after its first item, ms. */
    albumMaxWaitMs: z.number().int().min(0).max(30_000).default(3000),
  })
  .superRefine((c, ctx) => {
    if (c.mode === "webhook" && !c.webhookSecret) {
      ctx.addIssue({
        code: "custom",
        path: ["webhookSecret"],
        message: 'required when mode is "webhook" (Telegram sends it back on every request)',
      });
    }
  });

/** What callers pass (defaults optional). */
export type TelegramChannelConfig = z.input<typeof telegramChannelConfigSchema>;
/** After validation: every field resolved. */
export type ResolvedTelegramChannelConfig = z.output<typeof telegramChannelConfigSchema>;

export interface TelegramChannelDeps {
  logger: Logger;
}
