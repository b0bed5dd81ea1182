import type { WebchatChannel } from "../../channels/webchat/index.js";
import type { ToolRegistry } from "../agent/tool-registry.js";
import type { ChannelStatus } from "../channels/types.js";
import { registerMethods } from "../gateway/methods/index.js";
import { RpcDispatcher } from "../gateway/rpc.js";
import { GatewayServer } from "../gateway/server.js";
import type { RedisConnections } from "../redis/connections.js";
import type { Services } from "../services/index.js";
import { metricsText } from "../telemetry/index.js";
import type { WebhookMount } from "./channels.js";
import type { LeaseInfo } from "./leases.js";
import type { LiveRelay } from "./live-relay.js";

/** The RPC surface and the HTTP server of the gateway role. */

/** A channel's state in `health.channels` is its least healthy account's, ranked by this. */
const TROUBLE: Record<ChannelStatus, number> = {
  connected: 0,
  starting: 1,
  stopped: 2,
  reconnecting: 3,
  "needs-login": 4,
  error: 5,
};

/** One account in `health.channels.<name>.accounts` (API.md §8.5: `lease`/`heldBy` under a lease). */
export interface AccountHealth {
  status: ChannelStatus;
  lease?: "held" | "standby";
  heldBy?: string | null;
}

/**
 * `health` (API.md §4, §8.5): drivers, Redis, model, every channel, the flat `accounts` map by
 * `<channel>:<accountId>`, and the transcript tail cache's use. `channels.<name>` is its least
 * healthy account's state (§4) in the embedded mode; with leases (the redis store, §8.5) it is
 * `{ status, accounts: { <id>: { status, lease?, heldBy? } } }` so every gateway shows who holds what.
 */
export function healthOf(
  services: Pick<Services, "version" | "store" | "pipeline" | "channels">,
  redis: RedisConnections,
  models: {
    readonly demo: boolean;
    readonly defaultModel: string;
    circuits(): Promise<Record<string, unknown>>;
  },
  leases?: { info(channel: string, accountId: string): LeaseInfo | undefined } | null,
): () => Promise<Record<string, unknown>> {
  return async () => {
    const chans: Record<string, { status: ChannelStatus; accounts: Record<string, AccountHealth> }> = {};
    const accounts: Record<string, ChannelStatus> = {};
    // Details that need a person: a WhatsApp QR code to scan, a reconnect reason, a bad token.
    const details: Record<string, { state: string; detail: string; qr?: string }> = {};
    for (const a of services.channels.all()) {
      const st = a.status();
      accounts[`${a.channel}:${a.accountId}`] = st.state;
      chans[a.channel] ??= { status: st.state, accounts: {} };
      const chan = chans[a.channel] as { status: ChannelStatus; accounts: Record<string, AccountHealth> };
      if (TROUBLE[st.state] > TROUBLE[chan.status]) chan.status = st.state;
      const lease = leases?.info(a.channel, a.accountId);
      chan.accounts[a.accountId] = lease
        ? { status: st.state, lease: lease.lease, heldBy: lease.heldBy }
        : { status: st.state };
      if (st.detail)
        details[`${a.channel}:${a.accountId}`] = {
          state: st.state,
          detail: st.detail,
          ...(st.qr ? { qr: st.qr } : {}),
        };
    }
    const cache = services.store.transcripts.cacheStats();
    return {
      ok: true,
      version: services.version,
      storage: services.store.name,
      queue: services.pipeline.driver,
      redis: await redis.status(),
      model: models.demo ? "scripted/demo (demo: no model configured)" : models.defaultModel,
      // each model's circuit breaker (API.md §8.4): closed, open (skipped until openUntil) or half_open
      models: await models.circuits().catch(() => ({})),
      // §4's `channels: { name: status }` where no lease applies (embedded); §8.5's
      // `channels.<name>: { status, accounts: { <id>: { status, lease?, heldBy? } } }` with leases (redis)
      channels: leases ? chans : Object.fromEntries(Object.entries(chans).map(([n, c]) => [n, c.status])),
      accounts,
      ...(Object.keys(details).length ? { channelDetails: details } : {}),
      ...(cache.maxChars > 0 ? { transcriptCache: cache } : {}),
    };
  };
}

export function createRpc(
  services: Services,
  tools: ToolRegistry,
  health: () => Promise<Record<string, unknown>>,
): RpcDispatcher {
  const rpc = new RpcDispatcher(services.logger);
  registerMethods(rpc, { services, tools, health });
  return rpc;
}

/** The HTTP server (RPC, /ws, web chat page and socket, channel webhooks). */
export function createServer(
  services: Services,
  /** `token`: the configured one, or the one generated into the state dir (never none). */
  listen: { host: string; port: number; token: string },
  rpc: RpcDispatcher,
  webchat: WebchatChannel | null,
  hooks: WebhookMount[],
  /** bullmq: the live relay, told when `/ws` has clients (live events travel only then). */
  live: LiveRelay | null = null,
): GatewayServer {
  const { config } = services;
  const server = new GatewayServer({
    host: listen.host,
    port: listen.port,
    token: listen.token,
    maxBodyBytes: config.gateway.maxBodyBytes,
    maxJsonDepth: config.gateway.maxJsonDepth,
    maxWebhookBodyBytes: config.gateway.maxWebhookBodyBytes,
    allowedHosts: config.gateway.allowedHosts,
    allowedOrigins: config.gateway.allowedOrigins,
    logger: services.logger,
    rpc,
    bus: services.bus,
    ...(live ? { onListening: (on: boolean) => live.listening(on) } : {}),
    ...(services.media
      ? {
          media: {
            store: services.media,
            maxUploadBytes: Math.floor(config.channels.webchat.mediaMaxMb * 1024 * 1024),
            maxBytesByKind: config.media.maxBytes,
          },
        }
      : {}),
    ...(config.hooks.enabled ? { agentHook: { services, hooks: config.hooks } } : {}),
    ...(config.gateway.metrics.enabled
      ? { metrics: { auth: config.gateway.metrics.auth, text: metricsText } }
      : {}),
    ...(webchat
      ? {
          page: () => webchat.page(),
          sockets: [{ path: "/webchat/ws", onConnection: (socket, q) => webchat.connect(socket, q.v) }],
        }
      : {}),
  });
  for (const h of hooks) server.registerHook(h.path, (req) => h.handle(req.headers, req.rawBody));
  return server;
}
