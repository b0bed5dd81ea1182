import { webApi } from "@slack/bolt";
import { RateLimitedError, SwitchboardError } from "../../src/errors.js";

/** Slack `error` strings by what the caller can do about them. */
const AUTH = new Set([
  "invalid_auth",
  "not_authed",
  "account_inactive",
  "token_revoked",
  "token_expired",
  "no_permission",
]);
const FORBIDDEN = new Set([
  "missing_scope",
  "not_in_channel",
  "restricted_action",
  "is_archived",
  "ekm_access_denied",
]);
const NOT_FOUND = new Set(["channel_not_found", "user_not_found", "thread_not_found", "message_not_found"]);
const INVALID = new Set([
  "msg_too_long",
  "no_text",
  "invalid_arguments",
  "invalid_blocks",
  "too_many_attachments",
]);

/**
 * The one place Slack Web API failures become SwitchboardErrors. The token is never part of a
 * message: Slack errors carry only the method's `error` string.
 */
export function toSwitchboardError(err: unknown, action: string): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const details = { channel: "slack", action };
  if (!(err instanceof Error) || !("code" in err)) {
    return new SwitchboardError(
      "INTERNAL",
      `slack ${action}: ${err instanceof Error ? err.message : String(err)}`,
      {
        details,
      },
    );
  }
  const e = err as Error & {
    code: unknown;
    retryAfter?: unknown;
    data?: { error?: unknown };
    statusCode?: unknown;
    headers?: Record<string, unknown>;
  };
  switch (e.code) {
    case webApi.ErrorCode.RateLimitedError: {
      const seconds = typeof e.retryAfter === "number" ? e.retryAfter : 1;
      return new RateLimitedError(
        `slack ${action}: rate limited, retry after ${seconds}s`,
        seconds * 1000,
        err,
      );
    }
    case webApi.ErrorCode.PlatformError: {
      const code = typeof e.data?.error === "string" ? e.data.error : "unknown_error";
      const withCode = { details: { ...details, slackError: code }, cause: err };
      if (code === "ratelimited") return new RateLimitedError(`slack ${action}: rate limited`, 1000, err);
      if (AUTH.has(code)) {
        return new SwitchboardError(
          "UNAUTHORIZED",
          `slack ${action}: ${code}; check the bot token (xoxb-…)`,
          withCode,
        );
      }
      if (FORBIDDEN.has(code)) return new SwitchboardError("FORBIDDEN", `slack ${action}: ${code}`, withCode);
      if (NOT_FOUND.has(code)) return new SwitchboardError("NOT_FOUND", `slack ${action}: ${code}`, withCode);
      if (INVALID.has(code))
        return new SwitchboardError("INVALID_PARAMS", `slack ${action}: ${code}`, withCode);
      if (code === "fatal_error" || code === "internal_error" || code === "service_unavailable") {
        return new SwitchboardError("UNAVAILABLE", `slack ${action}: ${code}`, withCode);
      }
      return new SwitchboardError("INTERNAL", `slack ${action}: ${code}`, withCode);
    }
    case webApi.ErrorCode.HTTPError: {
      const status = typeof e.statusCode === "number" ? e.statusCode : 0;
      const withStatus = { details: { ...details, status }, cause: err };
      if (status === 429) {
        const seconds = Number(e.headers?.["retry-after"] ?? 1) || 1;
        return new RateLimitedError(
          `slack ${action}: rate limited, retry after ${seconds}s`,
          seconds * 1000,
          err,
        );
      }
      if (status === 401 || status === 403) {
        return new SwitchboardError("UNAUTHORIZED", `slack ${action}: HTTP ${status}`, withStatus);
      }
      if (status >= 500)
        return new SwitchboardError("UNAVAILABLE", `slack ${action}: HTTP ${status}`, withStatus);
      return new SwitchboardError("INTERNAL", `slack ${action}: HTTP ${status}`, withStatus);
    }
    case webApi.ErrorCode.RequestError:
      return new SwitchboardError("UNAVAILABLE", `slack ${action}: network error (${e.message})`, {
        details,
      });
    default:
      return new SwitchboardError("INTERNAL", `slack ${action}: ${e.message}`, { details, cause: err });
  }
}
