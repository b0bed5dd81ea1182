/**
 * The one error taxonomy. Every layer throws (or returns) a SwitchboardError with a code from
 * this union; the RPC layer maps codes to wire errors in one place (`src/gateway/rpc.ts`).
 */
export type ErrorCode =
  | "INVALID_PARAMS"
  | "UNAUTHORIZED"
  | "NOT_FOUND"
  | "FORBIDDEN"
  | "POLICY_DENIED"
  | "CONFLICT"
  | "TIMEOUT"
  | "UNAVAILABLE"
  /** The state dir's disk refused a write (full, quota, I/O error): retry once space returns. */
  | "STORAGE_UNAVAILABLE"
  | "INTERNAL"
  | "CONFIG"
  | "RATE_LIMITED"
  | "NOT_SUPPORTED"
  /** A spending limit (`usage.budgets`) refuses the turn (API.md §8.4). */
  | "BUDGET_EXCEEDED";

export class SwitchboardError extends Error {
  readonly code: ErrorCode;
  readonly details?: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    message: string,
    options?: { details?: Record<string, unknown>; cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SwitchboardError";
    this.code = code;
    if (options?.details) this.details = options.details;
  }
}

/** Input that can never succeed: a field path and what is wrong with it. */
export class InvalidParamsError extends SwitchboardError {
  constructor(message: string, details?: Record<string, unknown>) {
    super("INVALID_PARAMS", message, details ? { details } : undefined);
    this.name = "InvalidParamsError";
  }
}

export class NotFoundError extends SwitchboardError {
  constructor(kind: string, id: string) {
    super("NOT_FOUND", `${kind} not found: ${id}`, { details: { kind, id } });
    this.name = "NotFoundError";
  }
}

/** A platform or model asked us to slow down; retryAfterMs is how long to wait. */
export class RateLimitedError extends SwitchboardError {
  readonly retryAfterMs: number;
  constructor(message: string, retryAfterMs: number, cause?: unknown) {
    super("RATE_LIMITED", message, { details: { retryAfterMs }, cause });
    this.name = "RateLimitedError";
    this.retryAfterMs = retryAfterMs;
  }
}

export class NotSupportedError extends SwitchboardError {
  constructor(feature: string, where: string) {
    super("NOT_SUPPORTED", `${where} does not support ${feature}`, { details: { feature, where } });
    this.name = "NotSupportedError";
  }
}

/** Format zod issues as `path.to.field: message` lines (the path is what users need). */
export function formatIssues(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
  prefix = "",
): string {
  return issues
    .map((i) => {
      const path = i.path.map((p) => String(p)).join(".");
      return `${prefix}${path || "(root)"}: ${i.message}`;
    })
    .join("\n");
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A lost or refused connection to Redis (ioredis wording): the operation may succeed later. */
export function isConnectionError(err: unknown): boolean {
  if (err instanceof SwitchboardError)
    return err.code === "UNAVAILABLE" || err.code === "STORAGE_UNAVAILABLE";
  if (!(err instanceof Error)) return false;
  if (err.name === "MaxRetriesPerRequestError") return true;
  // ioredis wording for a lost connection, and Redis replies that mean "not now": loading its
  // AOF after a restart, a replica or a failing-over master, a cluster in motion
  return /ECONNREFUSED|ECONNRESET|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|Connection is closed|max ?retries ?per ?request|Stream isn't writeable|ETIMEDOUT|EPIPE|Command timed out|^LOADING |^READONLY |^MASTERDOWN |^TRYAGAIN |^CLUSTERDOWN |^BUSY /i.test(
    err.message,
  );
}
