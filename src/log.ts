import pino, { type Logger } from "pino";

export type { Logger };

/** Paths pino redacts wherever they appear in a log object. Secrets never reach a log line. */
export const REDACT_PATHS = [
  "token",
  "*.token",
  "apiKey",
  "*.apiKey",
  "botToken",
  "*.botToken",
  "appToken",
  "*.appToken",
  "signingSecret",
  "*.signingSecret",
  "secret",
  "*.secret",
  "password",
  "*.password",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  "config.gateway.auth.token",
  "config.models.providers.*.apiKey",
  "config.channels.*.accounts.*.token",
  "config.channels.*.accounts.*.botToken",
  "config.channels.*.accounts.*.appToken",
  "config.channels.*.accounts.*.signingSecret",
];

export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  const opts: pino.LoggerOptions = {
    level: options.level ?? "info",
    base: { app: "switchboard" },
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
  };
  return options.destination ? pino(opts, options.destination) : pino(opts);
}

/** A logger that drops everything: for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
