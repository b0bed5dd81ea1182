import { timingSafeEqual } from "node:crypto";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import type { WebSocket } from "ws";
import type { EventBus } from "../events.js";
import type { Logger } from "../log.js";
import { dashboardPage } from "./dashboard.js";
import { cronPanelPage } from "./dashboard-cron.js";
import { type AgentHookDeps, registerAgentHook } from "./hooks-agent.js";
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
  logger: Logger;
  rpc: RpcDispatcher;
  bus: EventBus;
  /** HTML served at `/` (the web chat when it exists; a how-to page otherwise). */
  page?: () => string;
  /** Extra WebSocket endpoints (the web chat), behind the same token check as `/ws`. */
  sockets?: Array<{
    path: string;
    onConnection: (socket: WebSocket, query: Record<string, string | undefined>) => void;
  }>;
  /** `POST /hooks/agent` (hooks.enabled): its own token, rate limit and body limit. */
  agentHook?: AgentHookDeps;
  /** Extra routes (web chat assets, dashboards) registered before listen. */
  extraRoutes?: (app: FastifyInstance) => void;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost", "0:0:0:0:0:0:0:1"]);

export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith("127.");
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
  #unsubscribe: (() => void) | null = null;
  #address: { host: string; port: number } | null = null;

  constructor(private readonly opts: GatewayServerOptions) {
    this.app = Fastify({ bodyLimit: opts.maxBodyBytes, logger: false, forceCloseConnections: true });
    // Keep raw bodies: JSON errors become our 400 shape, and webhook signatures need the exact bytes.
    this.app.removeAllContentTypeParsers();
    this.app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));
    this.app.setErrorHandler((err: { statusCode?: number; message: string; code?: string }, _req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      if (status === 500) opts.logger.error({ err }, "gateway: unhandled error");
      const code = status === 413 ? "INVALID_PARAMS" : status === 500 ? "INTERNAL" : "INVALID_PARAMS";
      const message =
        status === 413
          ? `request body too large (limit ${opts.maxBodyBytes} bytes)`
          : status === 500
            ? "internal error"
            : err.message;
      void reply.status(status).send({ id: null, ok: false, error: { code, message } });
    });
    this.#routes();
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
    app.get("/healthz", async () => ({ ok: true }));
    app.get("/", async (_req, reply) => {
      void reply.type("text/html; charset=utf-8");
      return (opts.page ?? landingPage)();
    });
    app.get("/dashboard/cron", async (_req, reply) => {
      void reply.type("text/html; charset=utf-8");
      return cronPanelPage();
    });
    app.get("/dashboard", async (_req, reply) => {
      void reply.type("text/html; charset=utf-8");
      return dashboardPage();
    });
    app.post("/rpc", async (req, reply) => {
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
      let body: unknown;
      try {
        body = JSON.parse(typeof req.body === "string" ? req.body : "");
      } catch {
        return reply.status(400).send({
          id: null,
          ok: false,
          error: { code: "INVALID_PARAMS", message: "request body is not valid JSON" },
        });
      }
      return opts.rpc.dispatch(body);
    });
    if (opts.agentHook)
      registerAgentHook(app, { ...opts.agentHook, ...(opts.token ? { gatewayToken: opts.token } : {}) });
    app.post("/hooks/*", async (req, reply) => {
      const path = req.url.split("?")[0] ?? req.url;
      const handler = this.#hooks.get(path);
      if (!handler)
        return reply
          .status(404)
          .send({ ok: false, error: { code: "NOT_FOUND", message: `no webhook at ${path}` } });
      const headers: Record<string, string | undefined> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(",") : v;
      try {
        const res = await handler({ headers, rawBody: typeof req.body === "string" ? req.body : "" });
        if (res.headers) void reply.headers(res.headers);
        return reply.status(res.status).send(res.body ?? "");
      } catch (err) {
        opts.logger.error({ err, path }, "webhook handler failed");
        // 503 tells the platform to redeliver later: nothing acknowledged is lost.
        return reply.status(503).send({ ok: false });
      }
    });
    if (opts.extraRoutes) opts.extraRoutes(app);
  }

  async listen(): Promise<{ host: string; port: number }> {
    await this.app.register(websocket, { options: { maxPayload: this.opts.maxBodyBytes } });
    this.app.register(async (scope) => {
      scope.get("/ws", { websocket: true }, (socket, req) => {
        const q = req.query as Record<string, string | undefined>;
        if (!this.#authorized(req, q.token)) {
          socket.send(
            JSON.stringify({
              id: null,
              ok: false,
              error: { code: "UNAUTHORIZED", message: "missing or invalid token" },
            }),
          );
          socket.close(4401, "unauthorized");
          return;
        }
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("message", (data) => {
          let body: unknown;
          try {
            body = JSON.parse(data.toString());
          } catch {
            socket.send(
              JSON.stringify({
                id: null,
                ok: false,
                error: { code: "INVALID_PARAMS", message: "frame is not valid JSON" },
              }),
            );
            return;
          }
          void this.opts.rpc.dispatch(body).then((r) => {
            if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(r));
          });
        });
      });
    });
    for (const extra of this.opts.sockets ?? []) {
      this.app.register(async (scope) => {
        scope.get(extra.path, { websocket: true }, (socket, req) => {
          const q = req.query as Record<string, string | undefined>;
          if (!this.#authorized(req, q.token)) {
            socket.send(
              JSON.stringify({ type: "error", code: "UNAUTHORIZED", message: "missing or invalid token" }),
            );
            socket.close(4401, "unauthorized");
            return;
          }
          extra.onConnection(socket, q);
        });
      });
    }
    this.#unsubscribe = this.opts.bus.onAny((event, data) => {
      if (this.#sockets.size === 0) return;
      const frame = JSON.stringify({ event, data });
      for (const s of this.#sockets) if (s.readyState === s.OPEN) s.send(frame);
    });
    await this.app.listen({ host: this.opts.host, port: this.opts.port });
    const addr = this.app.server.address();
    const port = addr && typeof addr === "object" ? addr.port : this.opts.port;
    this.#address = { host: this.opts.host, port };
    return this.#address;
  }

  get address(): { host: string; port: number } | null {
    return this.#address;
  }

  async close(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    for (const s of this.#sockets) s.terminate();
    this.#sockets.clear();
    await this.app.close();
  }
}
