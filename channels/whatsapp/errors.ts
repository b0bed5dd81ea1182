import { DisconnectReason } from "@whiskeysockets/baileys";
import { RateLimitedError, SwitchboardError } from "../../src/errors.js";

/**
 * Baileys reports failures as Boom errors: `output.statusCode` (a DisconnectReason on
 * connection errors) and, for server error stanzas, the numeric WhatsApp code in `data`.
 * Read structurally so a Boom from any copy of @hapi/boom works.
 */
export function statusCodeOf(err: unknown): number | undefined {
  if (!err || typeof err !== "object") return undefined;
  const e = err as { output?: { statusCode?: unknown }; data?: unknown };
  if (typeof e.output?.statusCode === "number") return e.output.statusCode;
  return undefined;
}

function serverCodeOf(err: unknown): number | undefined {
  const data = (err as { data?: unknown } | null)?.data;
  return typeof data === "number" ? data : undefined;
}

/**
 * The one place WhatsApp failures become SwitchboardErrors. `rateLimitRetryAfterMs` is used
 * for `rate-overlimit`, which says nothing about how long to wait.
 */
export function toSwitchboardError(
  err: unknown,
  action: string,
  rateLimitRetryAfterMs: number,
): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const status = statusCodeOf(err);
  const server = serverCodeOf(err);
  const details = {
    channel: "whatsapp",
    action,
    ...(status ? { status } : {}),
    ...(server ? { serverCode: server } : {}),
  };
  if (server === 429 || status === 429 || /rate-overlimit/i.test(message)) {
    return new RateLimitedError(
      `whatsapp ${action}: rate limited by WhatsApp (rate-overlimit); retry after ${rateLimitRetryAfterMs}ms`,
      rateLimitRetryAfterMs,
      err,
    );
  }
  if (status === DisconnectReason.loggedOut || server === 401) {
    return new SwitchboardError(
      "UNAUTHORIZED",
      `whatsapp ${action}: this device was logged out; re-link it`,
      {
        details,
        cause: err,
      },
    );
  }
  if (status === DisconnectReason.forbidden || server === 403) {
    return new SwitchboardError("FORBIDDEN", `whatsapp ${action}: ${message}`, { details, cause: err });
  }
  if (server === 404 || /item-not-found|not-found/i.test(message)) {
    return new SwitchboardError("NOT_FOUND", `whatsapp ${action}: ${message}`, { details, cause: err });
  }
  if (
    status === DisconnectReason.connectionClosed ||
    status === DisconnectReason.timedOut ||
    status === DisconnectReason.unavailableService ||
    status === DisconnectReason.restartRequired ||
    /connection (closed|lost)|timed out/i.test(message)
  ) {
    return new SwitchboardError("UNAVAILABLE", `whatsapp ${action}: not connected (${message})`, {
      details,
      cause: err,
    });
  }
  if (server === 400 || server === 406) {
    return new SwitchboardError("INVALID_PARAMS", `whatsapp ${action}: ${message}`, { details, cause: err });
  }
  return new SwitchboardError("INTERNAL", `whatsapp ${action}: ${message}`, { details, cause: err });
}
