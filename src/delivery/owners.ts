import { channelSettings } from "../config/channels.js";
import type { Services } from "../services/index.js";

/**
 * A notice to the gateway's owners (`channels.<name>.owners`), each in a direct message on the
 * channel that names them: a model's key rejected, a budget reached. `key` makes it idempotent
 * (the outbox posts one key once, across processes): put the period in it to say "once per hour".
 * Entries of the form `<channel>:<id>` count for their channel only; `"*"` is no one. Best effort:
 * a failed post is logged, never thrown. Returns how many owners were posted to.
 */
export async function notifyOwners(
  services: Pick<Services, "config" | "delivery" | "logger">,
  sessionKey: string,
  text: string,
  key: string,
): Promise<number> {
  let sent = 0;
  for (const channel of Object.keys(services.config.channels)) {
    const c = channelSettings(services.config, channel);
    if (!c?.owners || c.owners.length === 0) continue;
    const accountId = Object.keys(c.accounts ?? {})[0] ?? "default";
    for (const raw of c.owners) {
      const owner = raw.trim();
      if (owner === "*" || owner === "") continue;
      const colon = owner.indexOf(":");
      if (colon > 0 && owner.slice(0, colon) !== channel && /^[a-z]+$/.test(owner.slice(0, colon))) continue;
      const to = colon > 0 && owner.slice(0, colon) === channel ? owner.slice(colon + 1) : owner;
      try {
        const res = await services.delivery.deliver({
          sessionKey,
          text,
          idempotencyKey: `${key}:${channel}:${to}`,
          route: { channel, to, accountId },
          bypassPolicy: true,
        });
        if (res.status === "sent" || res.status === "duplicate" || res.status === "handed-off") sent++;
        else services.logger.warn({ channel, status: res.status, key }, "owner notice not delivered");
      } catch (err) {
        services.logger.warn({ err, channel, key }, "owner notice failed");
      }
    }
  }
  return sent;
}
