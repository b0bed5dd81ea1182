import { mediaImageSink } from "../agent/mcp/images.js";
import { McpManager } from "../agent/mcp/manager.js";
import { priceOf } from "../agent/providers/index.js";
import { AgentRuntime } from "../agent/runtime.js";
import { ToolRegistry } from "../agent/tool-registry.js";
import { agentTurn } from "../agent/turn-handler.js";
import { pendingApprovalsCount } from "../approvals/index.js";
import type { AuthStateStore, ChannelAdapter, InboundAction } from "../channels/types.js";
import type { LoadedConfig } from "../config/load.js";
import { installCronFlow } from "../cron/flow.js";
import { CronService } from "../cron/service.js";
import { HandoffDelivery } from "../delivery/handoff.js";
import { AdapterRegistry, ChannelDelivery } from "../delivery/index.js";
import { notifyOwners } from "../delivery/owners.js";
import { EventBus } from "../events.js";
import { installSendFlow } from "../flows/a2a.js";
import { installHookFlow } from "../flows/hook.js";
import { resolvesToLoopback } from "../gateway/hosts.js";
import { listenMetrics } from "../gateway/metrics.js";
import type { RpcDispatcher } from "../gateway/rpc.js";
import type { GatewayServer } from "../gateway/server.js";
import {
  ensureGatewayToken,
  removeGatewayInfo,
  shortTokenWarnings,
  writeGatewayInfo,
} from "../gateway/token.js";
import type { Logger } from "../log.js";
import { createJobHandlers, type HandlerRegistry } from "../pipeline/handlers.js";
import type { Pipeline } from "../pipeline/types.js";
import { handleApprovalPress } from "../routing/gates/approvals.js";
import { createRouter, type Router } from "../routing/router.js";
import type { CronDriver } from "../services/cron.js";
import type { Delivery, Services } from "../services/index.js";
import { callerOf } from "../sessions/service.js";
import { installSpawnFlow } from "../subagents/flow.js";
import {
  addApprovalsSource,
  addChannelSource,
  addQueueDepthSource,
  enableMetrics,
  metricsText,
  startTracing,
  withTrace,
} from "../telemetry/index.js";
import { allTools } from "../tools/index.js";
import { Budgets } from "../usage/budgets.js";
import { createChannels, createWebchat } from "./channels.js";
import { createCronDriver } from "./cron.js";
import { checkDriverChoice, createDrivers, createLedger, type Drivers, packageVersion } from "./drivers.js";
import { type AccountLeases, createAccountLeases } from "./leases.js";
import { createMediaSink, createMediaStore, schedulePrune } from "./media.js";
import { createRpc, createServer, healthOf } from "./server.js";
import { webchatHistory } from "./webchat-history.js";

/**
 * The composition root: turns validated config into concrete drivers (`drivers.ts`: store,
 * pipeline, providers), channels (`channels.ts`) and the server (`server.ts`), and hands them
 * down as interfaces. No other file picks a driver.
 */

export { createChannels, logoutWhatsApp } from "./channels.js";
export { openStore, packageVersion } from "./drivers.js";

export interface AppOptions {
  logger: Logger;
  role: "gateway" | "worker";
  /** Listen on HTTP (default true for the gateway role); tests may run a gateway without a port. */
  serve?: boolean;
  /** Overrides of gateway.host/port from the command line. */
  host?: string;
  port?: number;
  now?: () => number;
  /** A worker's own `GET /metrics` (`switchboard worker --metrics-port N [--metrics-host H]`). */
  metricsPort?: number;
  metricsHost?: string;
}

export interface App {
  services: Services;
  tools: ToolRegistry;
  runtime: AgentRuntime;
  rpc: RpcDispatcher;
  server: GatewayServer | null;
  handlers: HandlerRegistry;
  router: Router;
  address: { host: string; port: number } | null;
  /** The bearer token the server requires (configured, or generated into <stateDir>/gateway.token); null without a server. */
  token: string | null;
  /** Base URL clients use (loopback when bound to every interface); null until listening. */
  url: string | null;
  /** A worker's metrics endpoint once listening (`metricsPort`). */
  metricsAddress: { host: string; port: number } | null;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function createApp(loaded: LoadedConfig, opts: AppOptions): Promise<App> {
  const { config } = loaded;
  const logger = opts.logger;
  const now = opts.now ?? Date.now;
  const host = opts.host ?? config.gateway.host;
  const port = opts.port ?? config.gateway.port;
  // Loopback is decided on the addresses the host resolves to, never on its spelling.
  const loopback =
    opts.role === "gateway" && !config.gateway.auth.token ? await resolvesToLoopback(host) : true;
  checkDriverChoice(config, opts.role, host, () => loopback);
  const drivers = await createDrivers(loaded, logger, now, opts.role);
  const { store, pipeline, models } = drivers;
  const telemetry = await startTelemetry(config, pipeline);
  const bus = new EventBus();
  const channels = new AdapterRegistry();
  const media = await createMediaStore(config, drivers.stateDir, loaded.baseDir, now);
  const services: Services = {
    config,
    baseDir: loaded.baseDir,
    stateDir: drivers.stateDir,
    logger,
    store,
    pipeline,
    bus,
    models,
    channels,
    delivery: deliveryFor(
      opts.role,
      new ChannelDelivery({ config, store, channels, logger, media }),
      drivers,
    ),
    version: packageVersion(),
    now,
    media,
  };
  // Spending limits and usage counts (API.md §8.4): the budget ledger is in this process's memory
  // on the local queue (one process runs every turn), in Redis on bullmq (every gateway and worker
  // admits and reserves against the same accounts).
  services.usage = new Budgets(config.usage.budgets, {
    now,
    ...(config.usage.budgets.length > 0
      ? { ledger: await createLedger(config, drivers.redis, now, drivers.usage) }
      : {}),
    models: {
      chainFor: (agentId, entry) => models.chainFor(agentId, entry),
      price: (ref) => priceOf(config.models.providers, ref),
      maxOutputTokens: (ref) => models.maxOutputTokens(ref),
    },
    counter: drivers.usage,
    notify: (n) => {
      // the chat the turn came from, and the owners; the key makes each post once per budget and period
      services.delivery
        .deliver({
          sessionKey: n.sessionKey,
          text: n.text,
          idempotencyKey: `${n.key}:chat`,
          bypassPolicy: true,
        })
        .catch((err: unknown) => logger.warn({ err, key: n.key }, "budget notice not delivered"));
      void notifyOwners(services, n.sessionKey, n.text, n.key);
    },
  });
  // MCP servers run in the process that runs turns (a bullmq worker has its own), started on first use
  const mcp = new McpManager({
    config,
    logger,
    baseDir: loaded.baseDir,
    version: services.version,
    now,
    // images from tools become media parts
    ...(services.media ? { images: mediaImageSink(services.media, config.media.maxBytes.image) } : {}),
  });
  const tools = new ToolRegistry(allTools(), mcp);
  services.toolCatalog = {
    report: async (entry) => {
      const caller = callerOf(services, entry);
      await tools.prepare(caller);
      return tools.report(services, caller);
    },
  };
  const runtime = new AgentRuntime(services, tools);
  const handlers: HandlerRegistry = { beforeTurn: [], afterTurn: [], background: {} };
  // Follow-up flows of the session tools: reply-back loop + announce (a2a), completion announces, archive.
  installSendFlow(services, handlers);
  installSpawnFlow(services, handlers);
  // Cron jobs and webhook turns (API.md §7): cron.* always answers; ticks fire only with cron.enabled.
  const cron = new CronService(services);
  services.cron = cron;
  installCronFlow(services, handlers, cron);
  installHookFlow(services, handlers);
  // Run events reach the gateway's clients (/ws, dashboards); a worker has no one to tell, and
  // listening would make every finished turn wake it (bullmq: `{tag}:bus:runs`).
  if (opts.role === "gateway") pipeline.onRunEvent((e) => bus.emit(e.type, { run: e.run }));

  const router: Router = createRouter(services);
  const gateway = opts.role === "gateway";
  const { adapters, hooks } = gateway
    ? await createChannels(
        config,
        logger,
        { stateDir: drivers.stateDir, baseDir: loaded.baseDir },
        await authStatesOf(config, drivers),
      )
    : { adapters: [], hooks: [] };
  for (const a of adapters) channels.add(a);
  const webchat = gateway
    ? createWebchat(config, logger, models.demo, webchatHistory(services, "default"))
    : null;
  if (webchat) {
    adapters.push(webchat);
    channels.add(webchat);
  }

  // Many gateways on Redis: live connections run under leases (API.md §8.5).
  const leases = gateway ? await createAccountLeases(config, drivers.redis, adapters, logger) : null;
  const rpc = createRpc(services, tools, healthOf(services, drivers.redis, models, leases));
  const serve = gateway && opts.serve !== false;
  // No configured token: one is generated at first start and kept in the state dir (0600).
  const token = serve ? (config.gateway.auth.token ?? ensureGatewayToken(drivers.stateDir).token) : null;
  if (serve)
    for (const warning of shortTokenWarnings({
      gateway: config.gateway.auth.token,
      hooks: config.hooks.enabled ? config.hooks.token : undefined,
    }))
      logger.warn(warning);
  const server =
    serve && token ? createServer(services, { host, port, token }, rpc, webchat, hooks, drivers.live) : null;
  const app: App = {
    services,
    tools,
    runtime,
    rpc,
    server,
    handlers,
    router,
    address: null,
    token,
    url: null,
    metricsAddress: null,
    start: () => lifecycle.start(),
    stop: () => lifecycle.stop(),
  };
  const lifecycle = appLifecycle(
    app,
    drivers,
    adapters,
    opts.role,
    leases,
    () => createCronDriver(loaded, drivers, logger, now),
    telemetryLifecycle(app, telemetry, opts),
  );
  return app;
}

interface Telemetry {
  /** Metrics on (gateway.metrics.enabled): its off, and the removal of this app's gauge sources. */
  metricsOff: (() => void) | null;
  /** Tracing on (telemetry.otlp.endpoint): flush and stop. */
  stopTracing: (() => Promise<void>) | null;
}

/**
 * Metrics count while any app of the process has them on; tracing loads the OpenTelemetry SDK only
 * when an endpoint is set, and then stamps every accepted turn with its trace (API.md §8.6).
 */
async function startTelemetry(config: LoadedConfig["config"], pipeline: Pipeline): Promise<Telemetry> {
  const metricsOff = config.gateway.metrics.enabled ? enableMetrics() : null;
  const { endpoint, headers } = config.telemetry.otlp;
  const stopTracing = endpoint
    ? await startTracing({ endpoint, headers, serviceName: config.telemetry.serviceName })
    : null;
  if (stopTracing) {
    const submit = pipeline.submitTurn.bind(pipeline);
    pipeline.submitTurn = (req) => submit(withTrace(req));
  }
  return { metricsOff, stopTracing };
}

function telemetryLifecycle(app: App, t: Telemetry, opts: AppOptions) {
  let off: Array<() => void> = [];
  let worker: { close: () => Promise<void> } | null = null;
  return {
    async start() {
      if (!t.metricsOff) return;
      const { services } = app;
      off = [
        addQueueDepthSource(() => services.pipeline.depth?.() ?? 0),
        addApprovalsSource(pendingApprovalsCount(services.store)),
        addChannelSource(() =>
          services.channels.all().map((a) => ({
            channel: a.channel,
            account: a.accountId,
            up: a.status().state === "connected",
          })),
        ),
      ];
      if (opts.role === "worker" && opts.metricsPort !== undefined) {
        const { config, stateDir } = services;
        const token =
          config.gateway.metrics.auth === "none"
            ? undefined
            : (config.gateway.auth.token ?? ensureGatewayToken(stateDir).token);
        const host = opts.metricsHost ?? config.gateway.host;
        const served = await listenMetrics(
          { auth: config.gateway.metrics.auth, text: metricsText },
          token,
          host,
          opts.metricsPort,
        );
        worker = served;
        app.metricsAddress = served.address;
      }
    },
    async stop() {
      for (const f of off) f();
      off = [];
      await worker?.close();
      worker = null;
      app.metricsAddress = null;
    },
    async close() {
      t.metricsOff?.();
      await t.stopTracing?.().catch(() => undefined);
    },
  };
}

/**
 * A worker runs no channels: on bullmq its deliveries go to the gateways (src/delivery/handoff.ts);
 * a gateway posts through its own channels and takes the workers' hand-offs (appLifecycle).
 */
function deliveryFor(role: AppOptions["role"], local: ChannelDelivery, drivers: Drivers): Delivery {
  return role === "worker" && drivers.handoff ? new HandoffDelivery(local, drivers.handoff) : local;
}

/** With storage.driver "redis", channel auth state (WhatsApp) lives under the store prefix. */
export async function authStatesOf(
  config: LoadedConfig["config"],
  drivers: Pick<Drivers, "redis">,
): Promise<((channel: string, accountId: string) => AuthStateStore) | undefined> {
  const storage = config.storage;
  if (storage.driver !== "redis" || !config.channels.whatsapp) return undefined;
  const client = await drivers.redis.shared(storage.redisUrl, "config: storage.redisUrl");
  const { RedisAuthStateStore } = await import("../store/redis/auth-state.js");
  return (channel, accountId) => new RedisAuthStateStore(client, storage.prefix, channel, accountId);
}

/** The URL a client on this machine uses: a wildcard bind is reached over loopback. */
export function clientUrl(address: { host: string; port: number }): string {
  const h = address.host === "0.0.0.0" ? "127.0.0.1" : address.host === "::" ? "::1" : address.host;
  return `http://${h.includes(":") ? `[${h}]` : h}:${address.port}`;
}

/** Start: pipeline, then the port, then the channels. Stop: the reverse, then store and Redis. */
function appLifecycle(
  app: App,
  drivers: Drivers,
  adapters: ChannelAdapter[],
  role: AppOptions["role"],
  leases: AccountLeases | null,
  cronDriver: () => Promise<CronDriver>,
  telemetry: ReturnType<typeof telemetryLifecycle>,
) {
  const { services, server, runtime, handlers, router } = app;
  let started = false;
  let stopPrune: (() => void) | null = null;
  return {
    async start() {
      if (started) return;
      started = true;
      await services.pipeline.start(
        createJobHandlers(agentTurn(services, runtime), handlers, services.logger),
      );
      await drivers.live?.start(services.bus, server !== null);
      if (services.cron && services.config.cron.enabled) await services.cron.start(await cronDriver());
      if (server) {
        app.address = await server.listen();
        app.url = clientUrl(app.address);
        // Where this gateway runs, for the CLI and `switchboard mcp` pointed at the same state dir.
        writeGatewayInfo(services.stateDir, { url: app.url, pid: process.pid, startedAt: services.now() });
      }
      const media = services.media;
      if (media && role === "gateway") stopPrune = schedulePrune(media, services.logger);
      const ctx = media ? { media: createMediaSink(services.config, media, services.logger) } : {};
      const onInbound = async (msg: Parameters<typeof router.handle>[0]) => {
        await router.handle(msg);
      };
      // Button presses (approval requests) go to the approvals gate of the router.
      const onAction = (press: InboundAction) => handleApprovalPress(services, press);
      for (const a of adapters) {
        // A live connection under a lease is started by its lease, in one gateway at a time.
        if (leases && a.exclusive) continue;
        await a.start(onInbound, { ...ctx, onAction });
      }
      await leases?.start((a, lease) => a.start(onInbound, { ...ctx, lease, onAction }));
      // Hand-offs from workers are posted once the channels are up.
      if (drivers.handoff && role === "gateway")
        await drivers.handoff.consume((req) => services.delivery.deliver(req));
      await telemetry.start();
    },
    async stop() {
      if (!started) return;
      started = false;
      await server?.close();
      if (server) removeGatewayInfo(services.stateDir);
      await services.cron?.stop().catch((err) => services.logger.warn({ err }, "cron stop failed"));
      // Held accounts stop and their leases are released at once: a standby takes over next round.
      await leases?.stop();
      for (const a of services.channels.all())
        await a.stop().catch((err) => services.logger.warn({ err }, "channel stop failed"));
      await drivers.live?.stop();
      await drivers.handoff?.stop();
      await services.pipeline.stop();
      stopPrune?.();
      await services.media?.close();
      // after the pipeline: no turn calls a tool any more; each server goes with its process group
      await app.tools.mcp?.stop();
      // after the last turn: the counts not yet written go to the store before it closes
      await drivers.usage.close();
      await drivers.store.close();
      await drivers.redis.close();
      await telemetry.stop();
      await telemetry.close();
    },
  };
}
