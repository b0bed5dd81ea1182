import { z } from "zod";
import type { Logger } from "../../src/log.js";

/**
 * One Slack app installation (one workspace, one bot token). Same fields as
 * `channels.slack.accounts.<id>` in the config file plus the account id; the tuning fields
 * have defaults and are not user-facing.
 */
export const slackChannelConfigSchema = z
  .strictObject({
    accountId: z.string().min(1),
    /** Largest attachment taken, MB (`channels.slack.mediaMaxMb`); larger ones are never fetched. */
    mediaMaxMb: z.number().positive().default(20),
    /** Bot User OAuth token, `xoxb-…`. */
    botToken: z.string().min(1),
    /** App-level token with `connections:write`, `xapp-…`; required in socket mode. */
    appToken: z.string().min(1).optional(),
    /** Basic Information → Signing Secret; required in http mode. */
    signingSecret: z.string().min(1).optional(),
    mode: z.enum(["socket", "http"]).default("socket"),
    /** Web API base URL. Default https://slack.com/api/ (a trailing slash is added if missing). */
    apiUrl: z
      .string()
      .url()
      .transform((u) => (u.endsWith("/") ? u : `${u}/`))
      .optional(),
    /** HTTP mode: requests signed longer ago than this are refused (replay protection), seconds. */
    maxRequestAgeSeconds: z.number().int().min(1).default(300),
    /**
     * Origins (`https://host`) file downloads may go to with the bot token. Default: the origin of
     * `apiUrl` when set (a proxy), else https://files.slack.com. Any other file URL is refused.
     */
    fileOrigins: z
      .array(
        z
          .string()
          .url()
          .transform((u) => new URL(u).origin),
      )
      .optional(),
    /** How many recent event ids / message keys are remembered for dedupe. */
    dedupeSize: z.number().int().min(100).default(5000),
    /** Socket mode: drop the connection if Slack has not pinged for this long, ms (Slack's default 30000). */
    serverPingTimeoutMs: z.number().int().min(1000).default(30_000),
  })
  .superRefine((c, ctx) => {
    if (c.mode === "socket" && !c.appToken) {
      ctx.addIssue({
        code: "custom",
        path: ["appToken"],
        message: 'required when mode is "socket" (an app-level xapp- token with connections:write)',
      });
    }
    if (c.mode === "http" && !c.signingSecret) {
      ctx.addIssue({
        code: "custom",
        path: ["signingSecret"],
        message: 'required when mode is "http" (every Events API request is verified with it)',
      });
    }
  });

/** What callers pass (defaults optional). */
export type SlackChannelConfig = z.input<typeof slackChannelConfigSchema>;
/** After validation: every field resolved. */
export type ResolvedSlackChannelConfig = z.output<typeof slackChannelConfigSchema>;

export interface SlackChannelDeps {
  logger: Logger;
  /** Clock for signature freshness checks; tests pin it. Default Date.now. */
  now?: () => number;
}
