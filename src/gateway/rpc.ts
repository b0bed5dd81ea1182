import { z } from "zod";
import { type ErrorCode, formatIssues, isConnectionError, SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";

/**
 * JSON-RPC-ish dispatch shared by `POST /rpc` and `GET /ws` (API.md §4). Every method declares
 * a zod schema for its params; this file is the one place that maps errors to wire errors.
 */

export interface RpcError {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
}

export type RpcReply =
  | { id: unknown; ok: true; result: unknown }
  | { id: unknown; ok: false; error: RpcError };

export interface RpcMethod<S extends z.ZodType = z.ZodType> {
  params: S;
  handler: (params: z.infer<S>) => Promise<unknown>;
  /**
   * A hand check of params the schema plainly accepts (`true` only when `params` would parse to
   * an equal value); anything else — including every refusal — goes through the schema, whose
   * issues make the error message. For the hottest methods (`chat.send`), where the schema's
   * parse was a measurable share of a turn.
   */
  accepts?: (params: Record<string, unknown>) => boolean;
}

export function method<S extends z.ZodType>(
  params: S,
  handler: (params: z.infer<S>) => Promise<unknown>,
  accepts?: (params: Record<string, unknown>) => boolean,
): RpcMethod {
  return (accepts ? { params, handler, accepts } : { params, handler }) as unknown as RpcMethod;
}

/**
 * True when `body` is a call `requestSchema` accepts as it is (an object with a non-empty string
 * `method`, an `id` that is a string of at most 256 characters, a number, null or absent, and
 * `params` absent or an object): the schema then only copies it. Everything else goes through the
 * schema for its issues.
 */
function plainRequest(body: unknown): body is RpcRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const { id, method, params } = body as { id?: unknown; method?: unknown; params?: unknown };
  if (typeof method !== "string" || method.length === 0) return false;
  if (
    id !== undefined &&
    id !== null &&
    !(typeof id === "string" && id.length <= 256) &&
    !(typeof id === "number" && Number.isFinite(id))
  )
    return false;
  return params === undefined || (typeof params === "object" && params !== null && !Array.isArray(params));
}

/** JSON-RPC ids are strings, numbers or null: anything else is not echoed and the call is refused. */
export const rpcIdSchema = z.union([z.string().max(256), z.number(), z.null()], {
  error: "must be a string (at most 256 characters), a number or null",
});

export const requestSchema = z.object({
  id: rpcIdSchema.optional(),
  method: z.string().min(1),
  params: z.record(z.string(), z.unknown()).optional(),
});

export type RpcRequest = z.infer<typeof requestSchema>;

const WIRE_CODES: ReadonlySet<string> = new Set([
  "INVALID_PARAMS",
  "UNAUTHORIZED",
  "NOT_FOUND",
  "FORBIDDEN",
  "POLICY_DENIED",
  "CONFLICT",
  "TIMEOUT",
  "UNAVAILABLE",
  "STORAGE_UNAVAILABLE",
  "INTERNAL",
  "BUDGET_EXCEEDED",
]);

/** The one mapping from thrown values to wire errors. Internal details never leak. */
export function toRpcError(err: unknown, logger?: Logger): RpcError {
  if (err instanceof SwitchboardError) {
    let code: ErrorCode = err.code;
    if (!WIRE_CODES.has(code)) {
      code =
        code === "RATE_LIMITED" ? "UNAVAILABLE" : code === "NOT_SUPPORTED" ? "INVALID_PARAMS" : "INTERNAL";
    }
    return err.details
      ? { code, message: err.message, details: err.details }
      : { code, message: err.message };
  }
  if (isConnectionError(err))
    return {
      code: "UNAVAILABLE",
      message: "storage or queue is unavailable (Redis not reachable); retry shortly",
    };
  logger?.error({ err }, "rpc: internal error");
  return { code: "INTERNAL", message: "internal error (see gateway log)" };
}

export class RpcDispatcher {
  readonly #methods = new Map<string, RpcMethod>();

  constructor(private readonly logger: Logger) {}

  register(name: string, m: RpcMethod): this {
    this.#methods.set(name, m);
    return this;
  }

  has(name: string): boolean {
    return this.#methods.has(name);
  }

  names(): string[] {
    return [...this.#methods.keys()].sort();
  }

  /**
   * A body checked as a call: the request, or the error reply for a body that is not a
   * well-formed call (not an object, a bad `id`, no `method`). Transports answer such bodies with
   * HTTP 400. The envelope is parsed once per call: `run` takes the parsed request.
   */
  envelope(body: unknown): { request: RpcRequest } | { error: RpcReply } {
    if (plainRequest(body)) {
      const { id, method, params } = body;
      return { request: { id, method, params } };
    }
    const req = requestSchema.safeParse(body);
    if (req.success) return { request: req.data };
    const rawId = body && typeof body === "object" && "id" in body ? (body as { id: unknown }).id : null;
    const id = rpcIdSchema.safeParse(rawId).success ? rawId : null;
    return {
      error: {
        id: id ?? null,
        ok: false,
        error: { code: "INVALID_PARAMS", message: formatIssues(req.error.issues, "request: ") },
      },
    };
  }

  /** Dispatches one already-parsed request body. Never throws. */
  dispatch(body: unknown): Promise<RpcReply> {
    const e = this.envelope(body);
    return "error" in e ? Promise.resolve(e.error) : this.run(e.request);
  }

  /** Runs a request `envelope` accepted. Never throws. */
  async run(req: RpcRequest): Promise<RpcReply> {
    const id = req.id;
    const m = this.#methods.get(req.method);
    if (!m) {
      return {
        id: id ?? null,
        ok: false,
        error: {
          code: "NOT_FOUND",
          message: `unknown method "${req.method}"; available: ${this.names().join(", ")}`,
        },
      };
    }
    const raw = req.params ?? {};
    const params = m.accepts?.(raw) ? { success: true as const, data: raw } : m.params.safeParse(raw);
    if (!params.success) {
      return {
        id: id ?? null,
        ok: false,
        error: {
          code: "INVALID_PARAMS",
          message: formatIssues(params.error.issues, "params."),
          details: {
            issues: params.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })),
          },
        },
      };
    }
    try {
      const result = await m.handler(params.data);
      return { id: id ?? null, ok: true, result };
    } catch (err) {
      return { id: id ?? null, ok: false, error: toRpcError(err, this.logger) };
    }
  }
}
