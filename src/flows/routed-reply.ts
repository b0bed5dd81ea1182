import { isSilentReply } from "../pipeline/handlers.js";
import type { Services } from "../services/index.js";
import type { DeliveryContext } from "../store/types.js";

/**
 * Posts the reply of a cron or webhook turn to its target chat through the one delivery path
 * (send policy, per-channel formatting and chunking, the outbox keyed by the run id so a re-run
 * never posts twice). `NO_REPLY` / `ANNOUNCE_SKIP` / `REPLY_SKIP` post nothing.
 *
 * `policySessionKey` is the session the send policy is evaluated for: the session whose last chat
 * is the target (`to: "last"`), or the cron/hook session itself for an explicit route.
 */
export async function deliverRoutedReply(
  services: Pick<Services, "delivery">,
  req: {
    policySessionKey: string;
    route?: DeliveryContext;
    text: string | undefined;
    idempotencyKey: string;
    /** The turn's span (telemetry/trace.ts `turnSpan`): parent of the delivery span. */
    traceparent?: string | undefined;
  },
): Promise<{ delivery: string; failed: boolean }> {
  if (!req.text?.trim()) return { delivery: "none (empty reply)", failed: false };
  if (isSilentReply(req.text)) return { delivery: "skipped (silent reply)", failed: false };
  const res = await services.delivery.deliver({
    sessionKey: req.policySessionKey,
    text: req.text,
    idempotencyKey: req.idempotencyKey,
    ...(req.route ? { route: req.route } : {}),
    traceparent: req.traceparent,
  });
  switch (res.status) {
    case "sent":
      return { delivery: `sent to ${res.channel}`, failed: false };
    case "duplicate":
      return { delivery: "sent (already posted)", failed: false };
    case "handed-off":
      return { delivery: `handed to a gateway for ${res.channel}`, failed: false };
    case "blocked":
      return { delivery: `blocked: ${res.reason}`, failed: false };
    case "no-route":
      return { delivery: `not delivered: ${res.reason}`, failed: true };
    case "failed":
      return { delivery: `failed: ${res.error}`, failed: true };
  }
}
