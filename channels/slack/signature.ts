import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import type { WebhookHeaders } from "../../src/channels/types.js";

export function header(headers: WebhookHeaders, name: string): string | undefined {
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v[0] : v;
  }
  return undefined;
}

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

/**
 * Slack request signing, v0: `v0=` + hex HMAC-SHA256(signingSecret, `v0:<ts>:<raw body>`),
 * compared in constant time; timestamps further than `maxAgeSeconds` from now are refused
 * so a captured request cannot be replayed.
 *
 * Not Bolt's `verifySlackRequest` (@slack/bolt 5.1, receivers/verify-request): its window does not
 * fit. It is fixed at 5 minutes where ours is the account's `maxRequestAgeSeconds`, and it only
 * refuses timestamps in the past, so a request dated in the future passes; it also reads the
 * header as a number without checking it is one. Checked again for issue 46 (round 3).
 */
export function verifySlackSignature(
  headers: WebhookHeaders,
  rawBody: string,
  signingSecret: string,
  nowMs: number,
  maxAgeSeconds: number,
): SignatureCheck {
  const ts = header(headers, "x-slack-request-timestamp");
  const sig = header(headers, "x-slack-signature");
  if (!ts || !sig) return { ok: false, reason: "missing x-slack-request-timestamp or x-slack-signature" };
  if (!/^\d+$/.test(ts)) return { ok: false, reason: "x-slack-request-timestamp is not a number" };
  if (Math.abs(nowMs / 1000 - Number(ts)) > maxAgeSeconds)
    return { ok: false, reason: "request timestamp too old" };
  const expected = `v0=${createHmac("sha256", signingSecret).update(`v0:${ts}:${rawBody}`).digest("hex")}`;
  const a = Buffer.from(sig);
  const b = Buffer.from(expected);
  if (a.length !== b.length || !timingSafeEqual(a, b)) return { ok: false, reason: "signature mismatch" };
  return { ok: true };
}

/** The Events API envelope types we act on; other types are acknowledged and ignored. */
export const eventsEnvelopeSchema = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("url_verification"), challenge: z.string() }),
  z.looseObject({
    type: z.literal("event_callback"),
    event_id: z.string().min(1),
    team_id: z.string().optional(),
    event: z.looseObject({ type: z.string() }),
  }),
  z.looseObject({ type: z.literal("app_rate_limited") }),
]);

export type EventsEnvelope = z.infer<typeof eventsEnvelopeSchema>;
