import { GrammyError, HttpError } from "grammy";
import { NotSupportedError, RateLimitedError, SwitchboardError } from "../../src/errors.js";

/**
 * The one place Telegram failures become SwitchboardErrors. Messages never contain the bot
 * token: grammY's own messages name only the method, and network causes (whose URL would
 * carry the token) are not attached.
 */
export function toSwitchboardError(err: unknown, action: string): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  if (err instanceof GrammyError) {
    const status = err.error_code;
    const description = err.description;
    const details = { channel: "telegram", action, status, description };
    if (status === 429) {
      const seconds = err.parameters.retry_after ?? 1;
      return new RateLimitedError(
        `telegram ${action}: rate limited, retry after ${seconds}s`,
        seconds * 1000,
        err,
      );
    }
    if (status === 401) {
      return new SwitchboardError(
        "UNAUTHORIZED",
        `telegram ${action}: the bot token was rejected (401); check the token with @BotFather`,
        { details, cause: err },
      );
    }
    if (status === 403) {
      // "bot was blocked by the user", "bot is not a member of the group chat", …
      return new SwitchboardError("FORBIDDEN", `telegram ${action}: ${description}`, { details, cause: err });
    }
    if (status === 409) {
      return new SwitchboardError(
        "CONFLICT",
        `telegram ${action}: another process is polling this bot token, or a webhook is set while polling (409); ` +
          "run one instance per token and one mode",
        { details, cause: err },
      );
    }
    if (
      status === 400 &&
      /not a forum|CHAT_NOT_FORUM|topics? (are|is) (not enabled|disabled)/i.test(description)
    ) {
      return new NotSupportedError("threads (forum topics)", `this telegram chat (${description})`);
    }
    if (status === 404 || (status === 400 && /not found/i.test(description))) {
      return new SwitchboardError("NOT_FOUND", `telegram ${action}: ${description}`, { details, cause: err });
    }
    if (status === 400) {
      return new SwitchboardError("INVALID_PARAMS", `telegram ${action}: ${description}`, {
        details,
        cause: err,
      });
    }
    if (status >= 500) {
      return new SwitchboardError("UNAVAILABLE", `telegram ${action}: server error ${status}`, {
        details,
        cause: err,
      });
    }
    return new SwitchboardError("INTERNAL", `telegram ${action}: ${description}`, { details, cause: err });
  }
  if (err instanceof HttpError) {
    return new SwitchboardError("UNAVAILABLE", `telegram ${action}: network error (${err.message})`, {
      details: { channel: "telegram", action },
    });
  }
  return new SwitchboardError(
    "INTERNAL",
    `telegram ${action}: ${err instanceof Error ? err.message : String(err)}`,
    {
      details: { channel: "telegram", action },
    },
  );
}

/** Telegram's answer when `parse_mode` markup is malformed; the caller resends as plain text. */
export function isEntityParseError(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /can't parse entities|unsupported start tag|can't find end tag|unexpected end tag/i.test(err.description)
  );
}
