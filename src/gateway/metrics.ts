import { timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyInstance } from "fastify";

/**
 * `GET /metrics` (API.md §8.6): Prometheus text format, behind the gateway's bearer token unless
 * `gateway.metrics.auth` is "none". The gateway serves it beside RPC; a worker serves it alone on
 * `switchboard worker --metrics-port N` (`listenMetrics`).
 */

export interface MetricsRoute {
  auth: "token" | "none";
  /** The body and content type of one scrape (src/telemetry `metricsText`). */
  text: () => Promise<{ contentType: string; body: string }>;
}

function tokenMatches(header: string | undefined, token: string): boolean {
  if (typeof header !== "string" || !header.startsWith("Bearer ")) return false;
  const a = Buffer.from(header.slice(7).trim());
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function registerMetricsRoute(
  app: FastifyInstance,
  route: MetricsRoute,
  token: string | undefined,
): void {
  app.get("/metrics", async (req, reply) => {
    if (route.auth !== "none" && token && !tokenMatches(req.headers.authorization, token)) {
      void reply.status(401).header("www-authenticate", 'Bearer realm="switchboard"');
      return {
        id: null,
        ok: false,
        error: {
          code: "UNAUTHORIZED",
          message: 'missing or invalid bearer token (or set gateway.metrics.auth: "none")',
        },
      };
    }
    const m = await route.text();
    void reply.type(m.contentType);
    return m.body;
  });
}

/** A worker's metrics endpoint: only `GET /metrics`. Returns its address and its close. */
export async function listenMetrics(
  route: MetricsRoute,
  token: string | undefined,
  host: string,
  port: number,
): Promise<{ address: { host: string; port: number }; close: () => Promise<void> }> {
  const app = Fastify({ logger: false, forceCloseConnections: true });
  registerMetricsRoute(app, route, token);
  await app.listen({ host, port });
  const a = app.server.address();
  const address = a && typeof a === "object" ? { host: a.address, port: a.port } : { host, port };
  return { address, close: () => app.close() };
}
