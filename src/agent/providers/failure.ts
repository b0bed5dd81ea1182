import { RateLimitedError, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { parseRetryAfterMs } from "../../retry/index.js";
import type { ModelErrorClass } from "../../services/models.js";
import type { RetryDecision } from "./retry.js";

/**
 * What went wrong with one HTTP model call, independent of the SDK. Each provider has one
 * `describe…Error` that turns its SDK's errors into a Failure; this file decides retry and maps
 * a Failure to a SwitchboardError. Messages teach the fix and never contain a secret.
 */
export type Failure =
  | {
      kind: "status";
      status: number;
      message: string;
      headers?: { get(name: string): string | null };
      /** The body's error code or type, as sent (`insufficient_quota`, `overloaded_error`). */
      code?: string;
    }
  | { kind: "connection"; message: string }
  /** The server answered, then the connection broke: mid-reply when text had already arrived. */
  | { kind: "dropped"; message: string; afterChars: number }
  | { kind: "timeout"; timeoutMs?: number };

/**
 * Why a model call failed, decided once from the raw answer (status, headers, the body's error
 * code) before any message is written (API.md §8.4). The failover chain acts on it.
 */
export { MODEL_ERROR_CLASSES, type ModelErrorClass } from "../../services/models.js";

/** Anthropic's error types (and OpenAI's few) as the HTTP status they stand for. */
const STATUS_OF_TYPE: Record<string, number> = {
  overloaded_error: 529,
  rate_limit_error: 429,
  rate_limit_exceeded: 429,
  api_error: 500,
  server_error: 500,
  authentication_error: 401,
  permission_error: 403,
  billing_error: 402,
  insufficient_quota: 402,
  not_found_error: 404,
  invalid_request_error: 400,
  request_too_large: 413,
  timeout_error: 504,
};

/** The status a mid-stream error event stands for (it has none of its own): from its type, else 500. */
export function statusFromType(type: string | undefined): number {
  return (type !== undefined && STATUS_OF_TYPE[type]) || 500;
}

/** The class of an HTTP answer: status first, refined by the body's code (OpenAI bills with a 429). */
export function classifyStatus(status: number, code?: string): ModelErrorClass {
  if (status === 402 || (code !== undefined && /insufficient_quota|billing/i.test(code))) return "billing";
  if (status === 429) return "rate_limited";
  if (status === 401 || status === 403) return "auth";
  if (status === 503 || status === 529) return "overloaded";
  if (status === 408) return "timeout";
  if (status >= 500) return "server";
  return "invalid_request";
}

export function classifyFailure(f: Failure): ModelErrorClass {
  switch (f.kind) {
    case "timeout":
      return "timeout";
    case "connection":
    case "dropped":
      return "connection";
    case "status":
      return classifyStatus(f.status, f.code);
  }
}

/**
 * A model answer that could not be read as one (a 200 with an HTML page, JSON that is not a
 * completion, a stream cut before its end): thrown by the providers' transport, described as a
 * Failure like any HTTP failure, so it is classified and never crashes a turn.
 */
export class BadAnswerError extends Error {
  constructor(readonly failure: Failure) {
    super(failure.kind === "timeout" ? "timeout" : failure.message);
    this.name = "BadAnswerError";
  }
}

/** A short, printable excerpt of a body that was not what it should be. */
export function bodyExcerpt(text: string): string {
  const one = text.replace(/\s+/g, " ").trim();
  return one.length > 120 ? `${one.slice(0, 120)}…` : one || "(empty body)";
}

/** Reasons that mean the server was reached and then went away (not "unreachable"). */
const BROKEN_CONNECTION =
  /ECONNRESET|EPIPE|socket hang up|other side closed|terminated|premature close|UND_ERR_SOCKET/i;

/**
 * An error thrown while reading a streamed body (undici's `TypeError: terminated`, a reset socket)
 * is a connection that broke after the answer began; undefined for anything else.
 */
export function describeStreamBreak(err: unknown): Failure | undefined {
  if (!(err instanceof Error)) return undefined;
  const reason = connectionReason(err);
  if (!BROKEN_CONNECTION.test(`${err.message} ${reason}`)) return undefined;
  return { kind: "dropped", message: reason, afterChars: 0 };
}

/**
 * Refines a connection failure by what had happened: text already streamed, or a reset from a
 * server that was reached, is a dropped connection, never "unreachable".
 */
export function midReply(f: Failure | undefined, emittedChars: number): Failure | undefined {
  if (!f) return f;
  if (f.kind === "dropped") return { ...f, afterChars: emittedChars };
  if (f.kind !== "connection") return f;
  if (emittedChars > 0 || BROKEN_CONNECTION.test(f.message))
    return { kind: "dropped", message: f.message, afterChars: emittedChars };
  return f;
}

export interface FailureContext {
  providerId: string;
  model?: string;
  baseUrl: string;
  /** Values to scrub from any text that ends up in an error (the API key, header values). */
  secrets: string[];
}

/** 408, 429, 5xx, dropped connections and timeouts are worth another attempt. */
export function retryDecisionFor(f: Failure | undefined): RetryDecision {
  if (!f) return { retry: false };
  if (f.kind === "connection" || f.kind === "timeout") return { retry: true };
  if (f.kind === "dropped") return { retry: f.afterChars === 0 };
  if (f.status === 408 || f.status === 429 || f.status >= 500) {
    const retryAfterMs = parseRetryAfterMs(f.headers);
    return retryAfterMs === undefined ? { retry: true } : { retry: true, retryAfterMs };
  }
  return { retry: false };
}

/** A short, secret-free label for logs: `HTTP 503`, `connection`, `timeout`. */
export function failureSummary(f: Failure | undefined): string {
  if (!f) return "unknown";
  return f.kind === "status" ? `HTTP ${f.status}` : f.kind === "dropped" ? "dropped" : f.kind;
}

/** A URL fit for an error message: no credentials, query or fragment. */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    u.search = "";
    u.hash = "";
    return u.toString().replace(/\/$/, "");
  } catch {
    return "(invalid url)";
  }
}

export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join("[redacted]");
  // Bearer tokens and key-looking strings the server may echo back, whatever their source.
  return out
    .replace(/Bearer\s+\S+/gi, "Bearer [redacted]")
    .replace(/\bsk-[A-Za-z0-9_*-]{6,}/g, "sk-[redacted]");
}

function serverSays(f: { message: string }, secrets: readonly string[]): string {
  const m = redact(f.message.trim(), secrets);
  if (!m) return "";
  return `: ${m.length > 300 ? `${m.slice(0, 300)}…` : m}`;
}

export function failureToError(ctx: FailureContext, f: Failure, cause?: unknown): SwitchboardError {
  const p = `model provider "${ctx.providerId}"`;
  const where = safeUrl(ctx.baseUrl);
  // classified here, from the raw failure, before any text is written (API.md §8.4)
  const details: Record<string, unknown> = { provider: ctx.providerId, class: classifyFailure(f) };
  if (ctx.model) details.model = ctx.model;
  if (f.kind === "dropped") {
    const what =
      f.afterChars > 0
        ? `dropped the connection mid-reply (after ${f.afterChars} characters of text)`
        : "closed the connection before answering";
    return new SwitchboardError(
      "UNAVAILABLE",
      `${p} ${what} at ${where} (${redact(f.message, ctx.secrets)}); the server or a proxy in between cut the response`,
      { details: { ...details, baseUrl: where, failure: "dropped", afterChars: f.afterChars }, cause },
    );
  }
  if (f.kind === "timeout") {
    return new SwitchboardError(
      "TIMEOUT",
      `${p} did not answer within ${f.timeoutMs ?? "the configured"} ms at ${where}; raise models.providers.${ctx.providerId}.timeoutMs or check the server`,
      { details: { ...details, baseUrl: where, timeoutMs: f.timeoutMs, failure: "timeout" }, cause },
    );
  }
  if (f.kind === "connection") {
    return new SwitchboardError(
      "UNAVAILABLE",
      `${p} is unreachable at ${where} (${redact(f.message, ctx.secrets)}); check models.providers.${ctx.providerId}.baseUrl and that the server is running`,
      { details: { ...details, baseUrl: where, failure: "unreachable" }, cause },
    );
  }
  const status = f.status;
  details.status = status;
  details.failure = "status";
  if (status === 401 || status === 403) {
    // The server's text and the SDK error are left out on purpose: auth errors often echo part of the key.
    return new SwitchboardError(
      "UNAUTHORIZED",
      `${p} rejected the credentials (HTTP ${status}); check models.providers.${ctx.providerId}.apiKey`,
      { details },
    );
  }
  if (status === 404) {
    const what = ctx.model ? `model "${ctx.model}"` : "the requested resource";
    return new SwitchboardError(
      "NOT_FOUND",
      `${p} does not know ${what} (HTTP 404 at ${where})${serverSays(f, ctx.secrets)}; check the model name and models.providers.${ctx.providerId}.baseUrl`,
      { details: { ...details, kind: "model", id: ctx.model ?? "" }, cause },
    );
  }
  if (status === 429) {
    const told = parseRetryAfterMs(f.headers);
    const retryAfterMs = told ?? 1000;
    const err = new RateLimitedError(
      `${p} is rate limiting requests (HTTP 429)${serverSays(f, ctx.secrets)}; retry after ${Math.ceil(retryAfterMs)} ms`,
      retryAfterMs,
      cause,
    );
    // `serverRetryAfterMs`: what the server said, when it said anything (the chain waits only then)
    Object.assign(err.details ?? {}, details, told === undefined ? {} : { serverRetryAfterMs: told });
    return err;
  }
  if (status === 408) {
    return new SwitchboardError("TIMEOUT", `${p} timed out the request (HTTP 408)`, { details, cause });
  }
  if (status >= 500) {
    return new SwitchboardError(
      "UNAVAILABLE",
      `${p} failed with HTTP ${status} at ${where}${serverSays(f, ctx.secrets)}`,
      { details: { ...details, baseUrl: where }, cause },
    );
  }
  return new SwitchboardError(
    "INVALID_PARAMS",
    `${p} refused the request (HTTP ${status})${serverSays(f, ctx.secrets)}`,
    {
      details,
      cause,
    },
  );
}

/** The innermost useful reason of a network failure (`ECONNREFUSED`, `fetch failed`, …). */
export function connectionReason(err: unknown): string {
  let reason = err instanceof Error ? err.message : String(err);
  let cur: unknown = err;
  for (let depth = 0; depth < 5 && cur instanceof Error; depth++) {
    const code = (cur as Error & { code?: unknown }).code;
    if (typeof code === "string" && code) reason = code;
    else if (cur.message && depth > 0) reason = cur.message;
    cur = cur.cause;
  }
  return reason;
}

type LogFn = (message: string, ...rest: unknown[]) => void;

/**
 * The SDKs log to the console by default; route their warnings to pino instead. Only the
 * message string is kept: the extra arguments can hold request details.
 */
export function sdkLogger(
  logger: Logger,
  sdk: string,
): { error: LogFn; warn: LogFn; info: LogFn; debug: LogFn } {
  return {
    error: (message) => logger.error({ sdk }, message),
    warn: (message) => logger.warn({ sdk }, message),
    info: () => {},
    debug: () => {},
  };
}
