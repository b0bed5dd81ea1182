import { channelSettings } from "../config/channels.js";
import type { Config } from "../config/schema.js";
import type { Services } from "../services/index.js";

/** A person a private notice goes to: a direct message on `channel` (its first account). */
export interface Recipient {
  channel: string;
  to: string;
  accountId: string;
}

function accountOf(config: Config, channel: string): string {
  return Object.keys(channelSettings(config, channel)?.accounts ?? {})[0] ?? "default";
}

/**
 * The gateway's owners (`channels.<name>.owners`), each on the channel that names them. Entries
 * of the form `<channel>:<id>` count for their channel only; `"*"` is no one.
 */
export function ownerRecipients(config: Config): Recipient[] {
  const out: Recipient[] = [];
  for (const channel of Object.keys(config.channels)) {
    const c = channelSettings(config, channel);
    if (!c?.owners || c.owners.length === 0) continue;
    const accountId = accountOf(config, channel);
    for (const raw of c.owners) {
      const owner = raw.trim();
      if (owner === "*" || owner === "") continue;
      const colon = owner.indexOf(":");
      if (colon > 0 && owner.slice(0, colon) !== channel && /^[a-z]+$/.test(owner.slice(0, colon))) continue;
      const to = colon > 0 && owner.slice(0, colon) === channel ? owner.slice(colon + 1) : owner;
      out.push({ channel, to, accountId });
    }
  }
  return out;
}

/**
 * `<channel>:<id>` entries (an approvers list, a requester) on configured channels; a bare id
 * names no channel to write on, and is skipped.
 */
export function peopleRecipients(config: Config, people: readonly string[]): Recipient[] {
  const out: Recipient[] = [];
  for (const raw of people) {
    const m = /^([a-z]+):(.+)$/.exec(raw.trim());
    if (!m || !channelSettings(config, m[1]!)) continue;
    out.push({ channel: m[1]!, to: m[2]!.trim(), accountId: accountOf(config, m[1]!) });
  }
  return out;
}

/**
 * A private notice to each of `recipients` (duplicates once), on behalf of `sessionKey`: `key`
 * makes it idempotent (the outbox posts one key once, across processes). These are the
 * operator's messages to people, not the agent's into a chat, so the session's send policy does
 * not hold them back. Best effort: a failed post is logged, never thrown. Returns how many
 * people were posted to.
 */
export async function notifyPeople(
  services: Pick<Services, "delivery" | "logger">,
  sessionKey: string,
  text: string,
  key: string,
  recipients: readonly Recipient[],
  /** The span that asks (telemetry/trace.ts): parent of each post's delivery span. */
  traceparent?: string,
): Promise<number> {
  let sent = 0;
  const seen = new Set<string>();
  for (const { channel, to, accountId } of recipients) {
    if (seen.has(`${channel}:${to}`)) continue;
    seen.add(`${channel}:${to}`);
    try {
      const res = await services.delivery.deliver({
        sessionKey,
        text,
        idempotencyKey: `${key}:${channel}:${to}`,
        route: { channel, to, accountId },
        bypassPolicy: true,
        traceparent,
      });
      if (res.status === "sent" || res.status === "duplicate" || res.status === "handed-off") sent++;
      else services.logger.warn({ channel, status: res.status, key }, "notice not delivered");
    } catch (err) {
      services.logger.warn({ err, channel, key }, "notice failed");
    }
  }
  return sent;
}

/**
 * A notice to the gateway's owners, each in a direct message on the channel that names them: a
 * model's key rejected, a budget reached. Put the period in `key` to say "once per hour".
 */
export function notifyOwners(
  services: Pick<Services, "config" | "delivery" | "logger">,
  sessionKey: string,
  text: string,
  key: string,
  traceparent?: string,
): Promise<number> {
  return notifyPeople(services, sessionKey, text, key, ownerRecipients(services.config), traceparent);
}
