import type { z } from "zod";
import { formatIssues, SwitchboardError } from "../../errors.js";

/**
 * Validates one account's config with the adapter's schema; a CONFIG error names each field as
 * `channels.<channel>.accounts.<id>.<field>`.
 */
export function parseAccountConfig<T>(
  channel: string,
  schema: z.ZodType<T>,
  config: { accountId?: string },
): T {
  const parsed = schema.safeParse(config);
  if (!parsed.success) {
    const prefix = `channels.${channel}.accounts.${config.accountId || "?"}.`;
    throw new SwitchboardError("CONFIG", formatIssues(parsed.error.issues, prefix), {
      details: { channel, accountId: config.accountId },
    });
  }
  return parsed.data;
}
