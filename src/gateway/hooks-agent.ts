import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { HooksConfig } from "../config/schema.js";
import { errorMessage, formatIssues, isConnectionError, SwitchboardError } from "../errors.js";
import { uuidFrom } from "../ids.js";
import { DEFAULT_MAX_JSON_DEPTH, parseGuardedJson } from "../json-limits.js";
import type { Logger } from "../log.js";
import type { HookDeliver } from "../pipeline/turn-meta.js";
import type { Services } from "../services/index.js";
import { AGENT_ID_RE, classifyKind, isReservedKey, normalizeKey, parseSessionKey } from "../sessions/keys.js";
import { ensureSession } from "../sessions/service.js";

/**
 * `POST /hooks/agent` (API.md §7): an external system starts an agent turn. Its own secret
 * (`hooks.token`, bearer or `x-switchboard-token`; never the gateway token, never a query string),
 * a rate limit per token, a body limit, a zod-checked body, and `Idempotency-Key`: the run id and
 * the default session are derived from the key, so a retried webhook is the same run even across
 * gateways and restarts. The message is stored with `provenance.kind = "hook"` and shown to the
 * model as external, untrusted content.
 */

/** The agents (config), the hook session (store, created with bus and clock), its turn (pipeline), logs. */
export type HookServices = Pick<Services, "config" | "logger" | "now" | "pipeline" | "store" | "bus">;

export interface AgentHookDeps {
  services: HookServices;
  hooks: HooksConfig;
  /** The gateway's own token (however it was set): a hook token equal to it is refused. */
  gatewayToken?: string;
  now?: () => number;
}

const bodySchema = z.strictObject({
  message: z.string().min(1).max(32_000),
  name: z.string().trim().min(1).max(200).optional(),
  agentId: z
    .string()
    .trim()
    .toLowerCase()
    .regex(AGENT_ID_RE, "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
    .optional(),
  sessionKey: z.string().trim().min(1).max(1024).optional(),
  deliver: z.boolean().optional(),
  channel: z.string().trim().min(1).optional(),
  to: z.string().trim().min(1).optional(),
  accountId: z.string().trim().min(1).optional(),
  threadId: z.string().trim().min(1).optional(),
  timeoutSeconds: z.number().min(0).max(3600).optional(),
});

const WINDOW_MS = 60_000;
/** Failed authentications allowed per client address per minute before 429. */
const AUTH_FAILURES_PER_MINUTE = 20;
const MAX_IDEMPOTENCY_KEY = 256;
/** Limiter entries kept at most (old windows are dropped first). */
const MAX_LIMITER_KEYS = 10_000;

/** A fixed one-minute window counter per key. */
export class MinuteLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number,
  ) {}

  /** null when allowed; else the seconds until the window frees. */
  take(key: string): number | null {
    const now = this.now();
    let w = this.#windows.get(key);
    if (!w || now - w.start >= WINDOW_MS) {
      if (this.#windows.size >= MAX_LIMITER_KEYS) {
        for (const [k, v] of this.#windows) if (now - v.start >= WINDOW_MS) this.#windows.delete(k);
        if (this.#windows.size >= MAX_LIMITER_KEYS) this.#windows.clear();
      }
      w = { start: now, count: 0 };
      this.#windows.set(key, w);
    }
    if (w.count >= this.perMinute) return Math.max(1, Math.ceil((w.start + WINDOW_MS - now) / 1000));
    w.count++;
    return null;
  }
}

function sha(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(sha(a));
  const bb = Buffer.from(sha(b));
  return timingSafeEqual(ab, bb);
}

function presentedToken(req: FastifyRequest): string | null {
  const auth = req.headers.authorization;
  if (typeof auth === "string" && auth.startsWith("Bearer ")) return auth.slice(7).trim();
  const h = req.headers["x-switchboard-token"];
  if (typeof h === "string" && h.trim()) return h.trim();
  return null;
}

function fail(
  reply: FastifyReply,
  status: number,
  code: string,
  message: string,
  headers?: Record<string, string>,
) {
  if (headers) void reply.headers(headers);
  return reply.status(status).send({ ok: false, error: { code, message } });
}

export function registerAgentHook(app: FastifyInstance, deps: AgentHookDeps): void {
  const { services, hooks } = deps;
  const now = deps.now ?? (() => services.now());
  const token = hooks.token ?? "";
  const sameAsGateway = !!token && !!deps.gatewayToken && safeEqual(token, deps.gatewayToken);
  if (sameAsGateway)
    services.logger.error(
      "hooks: hooks.token equals the gateway token; POST /hooks/agent refuses every request",
    );

  app.post(
    "/hooks/agent",
    {
      bodyLimit: hooks.maxBodyBytes,
      // Auth and rate limit run before the body is read: a stranger never makes us buffer a body.
      onRequest: hookAuth(token, sameAsGateway, hooks.ratePerMinute, now),
      errorHandler: hookErrorHandler(hooks.maxBodyBytes, services.logger),
    },
    async (req, reply) => {
      const input = parseHookRequest(req);
      if (typeof input === "string") return fail(reply, 400, "INVALID_PARAMS", input);
      const target = hookTarget(services.config, hooks, token, input);
      if (typeof target === "string") return fail(reply, 400, "INVALID_PARAMS", target);
      return runHookTurn(services, input, target);
    },
  );
}

/**
 * The `onRequest` check: a configured hook token (never the gateway's), none in the query string,
 * the presented one equal to it (failures rate-limited per address), then `hooks.ratePerMinute`.
 */
function hookAuth(token: string, sameAsGateway: boolean, ratePerMinute: number, now: () => number) {
  const perToken = new MinuteLimiter(ratePerMinute, now);
  const authFailures = new MinuteLimiter(AUTH_FAILURES_PER_MINUTE, now);
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const ip = req.ip;
    if (!token) return fail(reply, 401, "UNAUTHORIZED", "hooks.token is not configured");
    if (sameAsGateway)
      return fail(
        reply,
        401,
        "UNAUTHORIZED",
        "hooks.token equals the gateway token; set a dedicated hooks.token",
      );
    // A token in the query string never authenticates (URLs end up in logs): the request has no token.
    if (typeof (req.query as Record<string, unknown>)?.token === "string")
      return fail(
        reply,
        401,
        "UNAUTHORIZED",
        "token in the query string is refused; send Authorization: Bearer <hooks.token>",
      );
    const given = presentedToken(req);
    if (!given || !safeEqual(given, token)) {
      const wait = authFailures.take(`ip:${ip}`);
      if (wait !== null)
        return fail(reply, 429, "RATE_LIMITED", "too many failed authentications; retry later", {
          "retry-after": String(wait),
        });
      return fail(
        reply,
        401,
        "UNAUTHORIZED",
        "missing or invalid hook token (Authorization: Bearer <hooks.token> or x-switchboard-token)",
      );
    }
    const wait = perToken.take(`token:${sha(given).slice(0, 16)}`);
    if (wait !== null)
      return fail(reply, 429, "RATE_LIMITED", `over hooks.ratePerMinute (${ratePerMinute}); retry later`, {
        "retry-after": String(wait),
      });
  };
}

/** 413 and other 4xx as INVALID_PARAMS, storage or queue down as 503 (retryable), else INTERNAL. */
function hookErrorHandler(maxBodyBytes: number, logger: Logger) {
  return (err: { statusCode?: number; message: string }, _req: FastifyRequest, reply: FastifyReply) => {
    if (err.statusCode === 413)
      return fail(
        reply,
        413,
        "INVALID_PARAMS",
        `body too large (hooks.maxBodyBytes is ${maxBodyBytes} bytes)`,
      );
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)
      return fail(reply, err.statusCode, "INVALID_PARAMS", err.message);
    // storage or queue down (Redis, a full disk): a retryable answer, never INTERNAL
    if (isConnectionError(err)) {
      const code = err instanceof SwitchboardError ? err.code : "UNAVAILABLE";
      return fail(reply, 503, code, `storage or queue unavailable: ${errorMessage(err)}; retry shortly`);
    }
    logger.error({ err }, "hooks/agent: failed");
    return fail(reply, 500, "INTERNAL", "internal error (see gateway log)");
  };
}

/** A checked hook request: its body, `Idempotency-Key` (trimmed, "" when absent) and delivery target. */
interface HookRequest {
  body: z.infer<typeof bodySchema>;
  idem: string;
  deliver: HookDeliver | undefined;
}

/** The body (depth-guarded JSON, zod), the idempotency key and `deliver`; a string is the 400 message. */
function parseHookRequest(req: FastifyRequest): HookRequest | string {
  const json = parseGuardedJson(typeof req.body === "string" ? req.body : "", DEFAULT_MAX_JSON_DEPTH);
  if (!json.ok) return `body is ${json.message}`;
  const parsed = bodySchema.safeParse(json.value);
  if (!parsed.success) return formatIssues(parsed.error.issues, "body.");
  const body = parsed.data;

  const idemHeader = req.headers["idempotency-key"];
  const idem = typeof idemHeader === "string" ? idemHeader.trim() : "";
  if (idem.length > MAX_IDEMPOTENCY_KEY) return `Idempotency-Key: at most ${MAX_IDEMPOTENCY_KEY} characters`;

  let deliver: HookRequest["deliver"];
  if (body.deliver) {
    if (!body.channel || !body.to || body.to === "last")
      return "body.channel, body.to: deliver: true needs an explicit channel and to";
    deliver = {
      channel: body.channel.toLowerCase(),
      to: body.to,
      ...(body.accountId ? { accountId: body.accountId } : {}),
      ...(body.threadId ? { threadId: body.threadId } : {}),
    };
  } else if (body.channel || body.to || body.accountId || body.threadId) {
    return "body.channel/to/accountId/threadId: only with deliver: true";
  }
  return { body, idem, deliver };
}

/** Where the turn runs: the session key, its agent, and the run id derived from the idempotency key. */
interface HookTarget {
  key: string;
  agentId: string;
  runId: string | undefined;
}

/**
 * The session (the body's key, which must be a hook key unless `hooks.allowAnySessionKey`, else
 * `hook:<uuid>` derived from the run id) and its agent; a string is the 400 message.
 */
function hookTarget(
  config: HookServices["config"],
  hooks: HooksConfig,
  token: string,
  { body, idem }: HookRequest,
): HookTarget | string {
  const agents = config.agents.list;
  const runId = idem ? `hook-${sha(`${sha(token)}|${idem}`).slice(0, 32)}` : undefined;
  let key: string;
  let agentId = body.agentId ?? agents[0]?.id ?? "main";
  if (body.sessionKey !== undefined) {
    key = normalizeKey(body.sessionKey);
    // `main` (and `global` under session.scope "global") names the agent's main session (SEMANTICS §1).
    if (key === "main" || (key === "global" && config.session.scope === "global"))
      key = `agent:${agentId}:main`;
    if (/\s/.test(key) || isReservedKey(key))
      return `body.sessionKey: "${body.sessionKey}" is not a valid session key`;
    if (!hooks.allowAnySessionKey && classifyKind(key) !== "hook")
      return 'body.sessionKey: must be a hook key ("hook:<id>"); set hooks.allowAnySessionKey to allow others';
    const scoped = parseSessionKey(key).agentId;
    if (scoped) {
      if (body.agentId && body.agentId !== scoped) return `body.agentId: the key belongs to agent ${scoped}`;
      agentId = scoped;
    }
  } else key = `hook:${runId ? uuidFrom(runId) : randomUUID()}`;
  if (!agents.some((a) => a.id === agentId))
    return `body.agentId: agent "${agentId}" is not configured (agents.list)`;
  return { key, agentId, runId };
}

/** Creates the session, submits the turn (stored as `hook` provenance) and answers, waiting if asked. */
async function runHookTurn(
  services: HookServices,
  { body, deliver }: HookRequest,
  { key, agentId, runId }: HookTarget,
): Promise<Record<string, unknown>> {
  const entry = await ensureSession(services, key, {
    agentId,
    ...(body.name ? { displayName: `hook ${body.name}` } : {}),
  });
  const rec = await services.pipeline.submitTurn({
    sessionKey: entry.key,
    agentId: entry.agentId,
    text: body.message,
    provenance: {
      kind: "hook",
      sourceTool: "hooks.agent",
      ...(body.name ? { senderName: body.name } : {}),
    },
    deliver: false,
    origin: "hook",
    ...(runId ? { runId } : {}),
    ...(deliver ? { meta: { hookDeliver: deliver } } : {}),
  });
  const sessionKey = rec.sessionKey;
  const timeoutSeconds = body.timeoutSeconds ?? 0;
  if (timeoutSeconds === 0) {
    if (rec.status === "ok") return { runId: rec.runId, status: "ok", reply: rec.reply ?? "", sessionKey };
    return { runId: rec.runId, status: "accepted", sessionKey };
  }
  const done = await services.pipeline.wait(rec.runId, timeoutSeconds * 1000);
  if (!done || done.status === "queued" || done.status === "running" || done.status === "waiting")
    return {
      runId: rec.runId,
      status: "timeout",
      error: `no reply within ${timeoutSeconds}s; the run goes on (agent.wait ${rec.runId})`,
      sessionKey,
    };
  if (done.status === "ok") return { runId: rec.runId, status: "ok", reply: done.reply ?? "", sessionKey };
  return { runId: rec.runId, status: "error", error: done.error ?? done.status, sessionKey };
}
