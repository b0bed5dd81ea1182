import pino, { type Logger } from "pino";
import { redactSecrets } from "./redact.js";

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

/** Deep-copies a log object with every string passed through the credential patterns. */
function redactDeep(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return redactSecrets(value);
  if (depth > 6 || value === null || typeof value !== "object") return value;
  if (value instanceof Error) {
    return {
      type: value.name,
      message: redactSecrets(value.message),
      stack: value.stack ? redactSecrets(value.stack) : undefined,
    };
  }
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v, depth + 1);
  return out;
}

export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  const opts: pino.LoggerOptions = {
    // Secrets that slip into messages or error texts (tokens in URLs, keys in echoed input) are
    // masked with the same patterns as sessions_history; known secret fields are censored below.
    formatters: { log: (obj) => redactDeep(obj) as Record<string, unknown> },
    hooks: {
      logMethod(args, method) {
        const redacted = args.map((a) => (typeof a === "string" ? redactSecrets(a) : a)) as typeof args;
        method.apply(this, redacted);
      },
    },
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
