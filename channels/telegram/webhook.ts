import { createHash, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import type { WebhookHeaders } from "../../src/channels/types.js";

export const SECRET_HEADER = "x-telegram-bot-api-secret-token";

/** Constant-time check of the secret header; hashing first hides the length of the secret too. */
export function secretMatches(headers: WebhookHeaders, secret: string): boolean {
  const got = header(headers, SECRET_HEADER);
  if (got === undefined) return false;
  const a = createHash("sha256").update(got).digest();
  const b = createHash("sha256").update(secret).digest();
  return timingSafeEqual(a, b);
}

export function header(headers: WebhookHeaders, name: string): string | undefined {
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v[0] : v;
  }
  return undefined;
}

/** The envelope check before grammY sees the body; the message fields are read defensively later. */
const updateEnvelope = z.looseObject({ update_id: z.number().int().nonnegative() });

export function parseUpdateBody(
  body: unknown,
): { ok: true; update: z.infer<typeof updateEnvelope> } | { ok: false } {
  let value = body;
  if (typeof body === "string" || Buffer.isBuffer(body)) {
    try {
      value = JSON.parse(body.toString());
    } catch {
      return { ok: false };
    }
  }
  const parsed = updateEnvelope.safeParse(value);
  return parsed.success ? { ok: true, update: parsed.data } : { ok: false };
}
