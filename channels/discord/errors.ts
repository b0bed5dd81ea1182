import { DiscordAPIError, HTTPError, RateLimitError, RESTJSONErrorCodes } from "discord.js";
import { NotSupportedError, RateLimitedError, SwitchboardError } from "../../src/errors.js";

/** Discord JSON error codes by what the caller can do about them. */
const FORBIDDEN = new Set<number>([
  RESTJSONErrorCodes.MissingAccess,
  RESTJSONErrorCodes.MissingPermissions,
  RESTJSONErrorCodes.CannotSendMessagesToThisUser,
  RESTJSONErrorCodes.CannotSendMessagesInNonTextChannel,
  RESTJSONErrorCodes.ThreadLocked,
]);
const NOT_FOUND = new Set<number>([
  RESTJSONErrorCodes.UnknownChannel,
  RESTJSONErrorCodes.UnknownMessage,
  RESTJSONErrorCodes.UnknownUser,
  RESTJSONErrorCodes.UnknownGuild,
]);

/**
 * The one place Discord failures become SwitchboardErrors. The token travels only in the
 * Authorization header, so neither Discord's messages nor request URLs contain it.
 */
export function toSwitchboardError(err: unknown, action: string): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const details = { channel: "discord", action };
  if (err instanceof RateLimitError) {
    return new RateLimitedError(
      `discord ${action}: rate limited${err.global ? " (global)" : ""}, retry after ${err.retryAfter}ms`,
      Math.max(0, Math.ceil(err.retryAfter)),
      err,
    );
  }
  if (err instanceof DiscordAPIError) {
    const code = typeof err.code === "number" ? err.code : Number(err.code);
    const withCode = { details: { ...details, status: err.status, discordCode: err.code }, cause: err };
    const text = `discord ${action}: ${err.message} (${err.status}/${err.code})`;
    if (err.status === 401) {
      return new SwitchboardError(
        "UNAUTHORIZED",
        `discord ${action}: the bot token was rejected (401); reset it in the Developer Portal (Bot → Reset Token)`,
        withCode,
      );
    }
    if (code === RESTJSONErrorCodes.CannotExecuteActionOnThisChannelType) {
      return new NotSupportedError("threads", `this discord channel (${err.message})`);
    }
    if (FORBIDDEN.has(code) || err.status === 403) return new SwitchboardError("FORBIDDEN", text, withCode);
    if (NOT_FOUND.has(code) || err.status === 404) return new SwitchboardError("NOT_FOUND", text, withCode);
    if (err.status === 400) return new SwitchboardError("INVALID_PARAMS", text, withCode);
    if (err.status >= 500) return new SwitchboardError("UNAVAILABLE", text, withCode);
    return new SwitchboardError("INTERNAL", text, withCode);
  }
  if (err instanceof HTTPError) {
    const withStatus = { details: { ...details, status: err.status }, cause: err };
    if (err.status >= 500)
      return new SwitchboardError("UNAVAILABLE", `discord ${action}: HTTP ${err.status}`, withStatus);
    return new SwitchboardError("INTERNAL", `discord ${action}: HTTP ${err.status}`, withStatus);
  }
  if (err instanceof Error) {
    const code = (err as Error & { code?: unknown }).code;
    if (code === "TokenInvalid") {
      return new SwitchboardError(
        "UNAUTHORIZED",
        `discord ${action}: the bot token was rejected; reset it in the Developer Portal (Bot → Reset Token)`,
        { details },
      );
    }
    // Gateway close codes surface as plain errors from the shard.
    if (/disallowed intents/i.test(err.message)) {
      return new SwitchboardError(
        "CONFIG",
        `discord ${action}: the gateway refused the intents (4014). Enable "Message Content Intent" under ` +
          "Bot → Privileged Gateway Intents in the Developer Portal",
        { details },
      );
    }
    if (/authentication failed/i.test(err.message)) {
      return new SwitchboardError(
        "UNAUTHORIZED",
        `discord ${action}: the gateway rejected the token (4004); reset it in the Developer Portal`,
        { details },
      );
    }
    if (err.name === "AbortError" || err.name === "TimeoutError") {
      return new SwitchboardError("TIMEOUT", `discord ${action}: request timed out`, { details });
    }
    if (
      err instanceof TypeError ||
      /ECONNREFUSED|ECONNRESET|ENOTFOUND|fetch failed|socket/i.test(err.message)
    ) {
      return new SwitchboardError("UNAVAILABLE", `discord ${action}: network error (${err.message})`, {
        details,
      });
    }
    return new SwitchboardError("INTERNAL", `discord ${action}: ${err.message}`, { details, cause: err });
  }
  return new SwitchboardError("INTERNAL", `discord ${action}: ${String(err)}`, { details });
}
