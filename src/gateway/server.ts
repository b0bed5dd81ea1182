import { timingSafeEqual } from "node:crypto";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { WebSocket } from "ws";
import type { EventBus } from "../events.js";
import { DEFAULT_MAX_JSON_DEPTH, parseGuardedJson, safeStringify } from "../json-limits.js";
import type { Logger } from "../log.js";
import { registerAssets } from "./assets.js";
import { dashboardPage } from "./dashboard.js";
import { cronPanelPage } from "./dashboard-cron.js";
import { usagePanelPage } from "./dashboard-usage.js";
import { type AgentHookDeps, registerAgentHook } from "./hooks-agent.js";
import { HostPolicy } from "./hosts.js";
import { type MediaRoutesOptions, registerMediaRoutes } from "./media-routes.js";
import { type MetricsRoute, registerMetricsRoute } from "./metrics.js";
import { landingPage } from "./page.js";
import type { RpcDispatcher } from "./rpc.js";

/**
 * HTTP + WebSocket front door (API.md §4): `POST /rpc`, `GET /ws`, `GET /healthz`, `GET /`, and
 * platform webhooks under `/hooks/…` (outside bearer auth, verified by each platform's signature).
 */

export interface WebhookResponse {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export type WebhookHandler = (req: {
  headers: Record<string, string | undefined>;
  rawBody: string;
}) => Promise<WebhookResponse>;

export interface GatewayServerOptions {
  host: string;
  port: number;
  token?: string;
  maxBodyBytes: number;
  /** Deepest JSON nesting accepted in bodies and frames (default 64). */
  maxJsonDepth?: number;
  /** Largest platform webhook body (default 1 MiB). */
  maxWebhookBodyBytes?: number;
  /** Host header names accepted besides loopback names and the bound address. */
  allowedHosts?: readonly string[];
  /** Browser origins accepted besides the gateway's own. */
  allowedOrigins?: readonly string[];
  logger: Logger;
  rpc: RpcDispatcher;
  bus: EventBus;
  /** `/ws` gained its first client (true) or lost its last (false): bus events have a reader or not. */
  onListening?: (listening: boolean) => void;
  /** HTML served at `/` (the web chat when it exists; a how-to page otherwise). */
  page?: () => string;
  /** Extra WebSocket endpoints (the web chat), behind the same token check as `/ws`. */
  sockets?: Array<{
    path: string;
    onConnection: (socket: WebSocket, query: Record<string, string | undefined>) => void;
  }>;
  /** `POST /hooks/agent` (hooks.enabled): its own token, rate limit and body limit. */
  agentHook?: AgentHookDeps;
  /** `GET /media/<id>` and `POST /media` (API.md §8.1), behind the gateway token. */
  media?: Omit<MediaRoutesOptions, "authorized" | "logger">;
  /** Extra routes (web chat assets, dashboards) registered before listen. */
  extraRoutes?: (app: FastifyInstance) => void;
  /** `GET /metrics` (gateway.metrics.enabled). */
  metrics?: MetricsRoute;
}

/** The platform webhooks' route, and their body limit unless gateway.maxWebhookBodyBytes says otherwise. */
const WEBHOOK_ROUTE = "/hooks/*";
const DEFAULT_MAX_WEBHOOK_BYTES = 1024 * 1024;

/** Paths outside the Host/Origin checks: probes, and platform webhooks (verified by signature). */
function exemptFromHostCheck(url: string): boolean {
  const p = url.split("?")[0] ?? url;
  // /metrics: scrapers name the gateway as they reach it (a container name); the token guards it
  return p === "/healthz" || p === "/metrics" || p.startsWith("/hooks/");
}

function forbidden(message: string) {
  return { id: null, ok: false, error: { code: "FORBIDDEN", message } };
}

/** Sends one frame; a value that cannot be serialised becomes an INTERNAL error frame. */
function sendFrame(socket: WebSocket, value: unknown, id: unknown = null): void {
  if (socket.readyState !== socket.OPEN) return;
  const text =
    safeStringify(value) ??
    JSON.stringify({
      id: typeof id === "string" || typeof id === "number" ? id : null,
      ok: false,
      error: { code: "INTERNAL", message: "reply could not be serialised" },
    });
  try {
    socket.send(text);
  } catch {
    // the socket went away between the check and the send
  }
}

function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

export class GatewayServer {
  readonly app: FastifyInstance;
  readonly #hooks = new Map<string, WebhookHandler>();
  readonly #sockets = new Set<WebSocket>();
  readonly #hosts: HostPolicy;
  readonly #maxDepth: number;
  #unsubscribe: (() => void) | null = null;
  #watch: (() => void) | null = null;
  #address: { host: string; port: number } | null = null;

  constructor(private readonly opts: GatewayServerOptions) {
    this.app = Fastify({ bodyLimit: opts.maxBodyBytes, logger: false, forceCloseConnections: true });
    this.#hosts = new HostPolicy({
      bindHost: opts.host,
      allowedHosts: opts.allowedHosts ?? [],
      allowedOrigins: opts.allowedOrigins ?? [],
    });
    this.#maxDepth = opts.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
    // A refused upgrade request never reaches @fastify/websocket's own hooks: end its socket here.
    // Both hooks are callback-style: an async hook costs a promise and a microtask per request.
    this.app.addHook("onResponse", (req, _reply, done) => {
      if (typeof req.headers.upgrade === "string" && !req.raw.socket.destroyed) req.raw.socket.destroy();
      done();
    });
    // Host and Origin checks run before routing and before any WebSocket upgrade is accepted.
    this.app.addHook("onRequest", (req, reply, done) => {
      const refusal = exemptFromHostCheck(req.url) ? null : this.#hostRefusal(req);
      if (refusal !== null) void reply.status(403).send(forbidden(refusal));
      done();
    });
    // Keep raw bodies: JSON errors become our 400 shape, and webhook signatures need the exact bytes.
    this.app.removeAllContentTypeParsers();
    this.app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));
    this.app.setErrorHandler((err: { statusCode?: number; message: string; code?: string }, req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      if (status === 500) opts.logger.error({ err }, "gateway: unhandled error");
      const code = status === 413 ? "INVALID_PARAMS" : status === 500 ? "INTERNAL" : "INVALID_PARAMS";
      const message =
        status === 413
          ? req.routeOptions.url === WEBHOOK_ROUTE
            ? `request body too large (gateway.maxWebhookBodyBytes is ${opts.maxWebhookBodyBytes ?? DEFAULT_MAX_WEBHOOK_BYTES} bytes)`
            : `request body too large (limit ${opts.maxBodyBytes} bytes)`
          : status === 500
            ? "internal error"
            : err.message;
      void reply.status(status).send({ id: null, ok: false, error: { code, message } });
    });
    this.#routes();
  }

  /** Why a request's Host or Origin may not use this gateway, or null when they may. */
  #hostRefusal(req: FastifyRequest): string | null {
    if (!this.#hosts.hostAllowed(req.headers.host)) {
      return `Host ${JSON.stringify(req.headers.host ?? "")} is not this gateway's (loopback names, the bound address, gateway.allowedHosts)`;
    }
    const origin = req.headers.origin;
    const mutating = req.method !== "GET" && req.method !== "HEAD" && req.method !== "OPTIONS";
    const upgrade = typeof req.headers.upgrade === "string";
    if (
      origin !== undefined &&
      (mutating || upgrade) &&
      !this.#hosts.originAllowed(origin, req.headers.host)
    ) {
      return `Origin ${JSON.stringify(origin)} may not use this gateway (only its own pages, or gateway.allowedOrigins)`;
    }
    return null;
  }

  /** Registers a platform webhook at `path` (must start with /hooks/). */
  registerHook(path: string, handler: WebhookHandler): void {
    if (!path.startsWith("/hooks/")) throw new Error(`webhook path must start with /hooks/: ${path}`);
    this.#hooks.set(path, handler);
  }

  #authorized(req: FastifyRequest, queryToken?: string): boolean {
    const token = this.opts.token;
    if (!token) return true;
    const header = req.headers.authorization;
    if (
      typeof header === "string" &&
      header.startsWith("Bearer ") &&
      safeEqual(header.slice(7).trim(), token)
    )
      return true;
    return typeof queryToken === "string" && safeEqual(queryToken, token);
  }

  #routes(): void {
    const { app, opts } = this;
    this.#pages();
    app.post("/rpc", (req, reply) => this.#rpc(req, reply));
    if (opts.agentHook)
      registerAgentHook(app, { ...opts.agentHook, ...(opts.token ? { gatewayToken: opts.token } : {}) });
    app.post(
      WEBHOOK_ROUTE,
      { bodyLimit: opts.maxWebhookBodyBytes ?? DEFAULT_MAX_WEBHOOK_BYTES },
      (req, reply) => this.#webhook(req, reply),
    );
    if (opts.media)
      registerMediaRoutes(app, {
        ...opts.media,
        authorized: (req, q) => this.#authorized(req, q),
        logger: opts.logger,
      });
    if (opts.metrics) registerMetricsRoute(app, opts.metrics, opts.token);
    if (opts.extraRoutes) opts.extraRoutes(app);
  }

  /** The health probe, static assets, the landing (or web chat) page and the dashboards. */
  #pages(): void {
    const { app, opts } = this;
    app.get("/healthz", async () => ({ ok: true }));
    registerAssets(app);
    app.get("/", async (_req, reply) => {
      void reply.type("text/html; charset=utf-8");
      return (opts.page ?? landingPage)();
    });
    app.get("/dashboard/cron", async (_req, reply) => {
      void reply.type("text/html; charset=utf-8");
      return cronPanelPage();
    });
    app.get("/dashboard/usage", async (_req, reply) => {
      void reply.type("text/html; charset=utf-8");
      return usagePanelPage();
    });
    app.get("/dashboard", async (_req, reply) => {
      void reply.type("text/html; charset=utf-8");
      return dashboardPage();
    });
  }

  /** `POST /rpc`: bearer token, JSON only, depth-guarded body, one envelope dispatched. */
  async #rpc(req: FastifyRequest, reply: FastifyReply) {
    if (!this.#authorized(req)) {
      return reply.status(401).send({
        id: null,
        ok: false,
        error: {
          code: "UNAUTHORIZED",
          message: "missing or invalid bearer token (Authorization: Bearer <gateway.auth.token>)",
        },
      });
    }
    // JSON only: a "simple" content type (text/plain, forms) is what a cross-site page can send.
    const type = String(req.headers["content-type"] ?? "")
      .split(";")[0]
      ?.trim()
      .toLowerCase();
    if (type !== "application/json") {
      return reply.status(415).send({
        id: null,
        ok: false,
        error: { code: "INVALID_PARAMS", message: "content-type must be application/json" },
      });
    }
    const parsed = parseGuardedJson(typeof req.body === "string" ? req.body : "", this.#maxDepth);
    if (!parsed.ok) {
      return reply.status(400).send({
        id: null,
        ok: false,
        error: { code: "INVALID_PARAMS", message: `request body is ${parsed.message}` },
      });
    }
    const call = this.opts.rpc.envelope(parsed.value);
    if ("error" in call) return reply.status(400).send(call.error);
    const result = await this.opts.rpc.run(call.request);
    const text =
      safeStringify(result) ??
      JSON.stringify({
        id: result.id,
        ok: false,
        error: { code: "INTERNAL", message: "reply could not be serialised" },
      });
    return reply.type("application/json; charset=utf-8").send(text);
  }

  /** `POST /hooks/<channel>`: a channel's platform webhook, by path; 503 when its handler fails. */
  async #webhook(req: FastifyRequest, reply: FastifyReply) {
    const path = req.url.split("?")[0] ?? req.url;
    const handler = this.#hooks.get(path);
    if (!handler)
      return reply
        .status(404)
        .send({ ok: false, error: { code: "NOT_FOUND", message: `no webhook at ${path}` } });
    const headers: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(",") : v;
    const rawBody = typeof req.body === "string" ? req.body : "";
    if (/json/i.test(headers["content-type"] ?? "") || /^\s*[[{]/.test(rawBody)) {
      const guarded = parseGuardedJson(rawBody, this.#maxDepth);
      if (!guarded.ok && guarded.reason === "too-deep")
        return reply
          .status(400)
          .send({ ok: false, error: { code: "INVALID_PARAMS", message: guarded.message } });
    }
    try {
      const res = await handler({ headers, rawBody });
      if (res.headers) void reply.headers(res.headers);
      return reply.status(res.status).send(res.body ?? "");
    } catch (err) {
      this.opts.logger.error({ err, path }, "webhook handler failed");
      // 503 tells the platform to redeliver later: nothing acknowledged is lost.
      return reply.status(503).send({ ok: false });
    }
  }

  async listen(): Promise<{ host: string; port: number }> {
    await this.app.register(websocket, { options: { maxPayload: this.opts.maxBodyBytes } });
    this.app.register(async (scope) => {
      scope.get("/ws", { websocket: true }, (socket, req) => {
        const q = req.query as Record<string, string | undefined>;
        if (!this.#authorized(req, q.token)) {
          sendFrame(socket, {
            id: null,
            ok: false,
            error: { code: "UNAUTHORIZED", message: "missing or invalid token" },
          });
          socket.close(4401, "unauthorized");
          return;
        }
        this.#sockets.add(socket);
        if (this.#sockets.size === 1) this.#audience(true);
        socket.on("close", () => {
          if (this.#sockets.delete(socket) && this.#sockets.size === 0) this.#audience(false);
        });
        socket.on("error", (err) => this.opts.logger.debug({ err }, "ws: socket error"));
        // Every frame is handled under a catch: a bad frame answers an error, the socket and the process stay up.
        socket.on("message", (data, isBinary) => {
          try {
            const text = isBinary ? Buffer.from(data as Buffer).toString("utf8") : data.toString();
            const parsed = parseGuardedJson(text, this.#maxDepth);
            if (!parsed.ok) {
              sendFrame(socket, {
                id: null,
                ok: false,
                error: { code: "INVALID_PARAMS", message: `frame is ${parsed.message}` },
              });
              return;
            }
            this.opts.rpc
              .dispatch(parsed.value)
              .then((r) => sendFrame(socket, r, r.id))
              .catch((err: unknown) => {
                this.opts.logger.error({ err }, "ws: dispatch failed");
                sendFrame(socket, {
                  id: null,
                  ok: false,
                  error: { code: "INTERNAL", message: "internal error" },
                });
              });
          } catch (err) {
            this.opts.logger.error({ err }, "ws: frame handler failed");
            sendFrame(socket, {
              id: null,
              ok: false,
              error: { code: "INTERNAL", message: "internal error" },
            });
          }
        });
      });
    });
    for (const extra of this.opts.sockets ?? []) {
      this.app.register(async (scope) => {
        scope.get(extra.path, { websocket: true }, (socket, req) => {
          const q = req.query as Record<string, string | undefined>;
          if (!this.#authorized(req, q.token)) {
            sendFrame(socket, { type: "error", code: "UNAUTHORIZED", message: "missing or invalid token" });
            socket.close(4401, "unauthorized");
            return;
          }
          socket.on("error", (err) => this.opts.logger.debug({ err }, "ws: socket error"));
          try {
            extra.onConnection(socket, q);
          } catch (err) {
            this.opts.logger.error({ err, path: extra.path }, "ws: connection handler failed");
            socket.close(1011, "internal error");
          }
        });
      });
    }
    this.#unsubscribe = this.opts.bus.onAny((event, data) => {
      if (this.#sockets.size === 0) return;
      const frame = safeStringify({ event, data });
      if (frame === null) return;
      for (const s of this.#sockets) if (s.readyState === s.OPEN) s.send(frame);
    });
    await this.app.listen({ host: this.opts.host, port: this.opts.port });
    const addr = this.app.server.address();
    const port = addr && typeof addr === "object" ? addr.port : this.opts.port;
    this.#address = { host: this.opts.host, port };
    return this.#address;
  }

  /**
   * The first WebSocket client came or the last one left: while any is connected the events fed
   * to them through `onAny` count as watched on the bus (so turns stream their answers), and the
   * live relay is told (`onListening`).
   */
  #audience(on: boolean): void {
    if (on) this.#watch ??= this.opts.bus.watch("run.delta");
    else {
      this.#watch?.();
      this.#watch = null;
    }
    this.opts.onListening?.(on);
  }

  get address(): { host: string; port: number } | null {
    return this.#address;
  }

  async close(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    for (const s of this.#sockets) s.terminate();
    if (this.#sockets.size > 0) this.#audience(false);
    this.#sockets.clear();
    await this.app.close();
  }
}
