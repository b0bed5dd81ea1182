import { notifyOwners } from "../delivery/owners.js";
import type { Services } from "../services/index.js";
import { resolveModelRef } from "./providers/index.js";

/**
 * `auth` and `billing` failures need a person (API.md §8.4): the owners are told once per model
 * per hour which key to check. The hour is in the notice's idempotency key, so every process (and
 * every retry) posts it once; the map spares the outbox round trips within this process.
 */
const told = new Map<string, number>();
const HOUR_MS = 3_600_000;

export function credentialNotice(
  services: Pick<Services, "config" | "delivery" | "logger" | "now">,
  sessionKey: string,
  ref: string,
  cls: "auth" | "billing",
  /** The span of the model call that met it (telemetry/trace.ts): parent of the notices' delivery spans. */
  traceparent?: string,
): void {
  const hour = Math.floor(services.now() / HOUR_MS);
  const seen = `${ref}|${cls}`;
  if (told.get(seen) === hour) return;
  if (told.size > 1000) told.clear();
  told.set(seen, hour);
  const { provider } = resolveModelRef(ref);
  const what =
    cls === "auth"
      ? "rejected its API key (HTTP 401/403)"
      : "refused the call for billing (HTTP 402 / insufficient_quota)";
  const text =
    `Model ${ref} ${what}; turns move on to the next model of their chain. ` +
    `Check the key of models.providers.${provider}.apiKey${cls === "billing" ? " and the account's credit" : ""}.`;
  services.logger.warn({ ref, class: cls, provider }, "model credentials need attention; telling the owners");
  void notifyOwners(services, sessionKey, text, `model-key:${ref}:${cls}:${hour}`, traceparent);
}
