import { readFileSync } from "node:fs";
import path from "node:path";
import { createWebchatChannel } from "../../channels/webchat/index.js";
import { ConfiguredModels } from "../agent/models.js";
import { AgentRuntime } from "../agent/runtime.js";
import { ToolRegistry } from "../agent/tool-registry.js";
import { createJobHandlers } from "../agent/turn-handler.js";
import type { ChannelAdapter, WebhookHeaders } from "../channels/types.js";
import type { LoadedConfig } from "../config/load.js";
import { AdapterRegistry, ChannelDelivery } from "../delivery/index.js";
import { SwitchboardError } from "../errors.js";
import { EventBus } from "../events.js";
import { installSendFlow } from "../flows/a2a.js";
import { installSpawnFlow } from "../flows/spawn.js";
import { registerMethods } from "../gateway/methods.js";
import { RpcDispatcher } from "../gateway/rpc.js";
import { GatewayServer, isLoopbackHost } from "../gateway/server.js";
import type { Logger } from "../log.js";
import type { HandlerRegistry } from "../pipeline/handlers.js";
import { createLocalPipeline } from "../pipeline/local/index.js";
import type { Pipeline } from "../pipeline/types.js";
import { RedisConnections } from "../redis/connections.js";
import { createRouter, type Router } from "../routing/router.js";
import type { Services } from "../services.js";
import { classifyKind } from "../sessions/keys.js";
import { createFsStore } from "../store/fs/index.js";
import type { StoreDriver } from "../store/types.js";
import { allTools } from "../tools/index.js";

/**
 * The composition root: turns validated config into concrete drivers (store, pipeline,
 * providers, channels) and hands them down as interfaces. No other file picks a driver.
 */

export function packageVersion(): string {
  // src/app/index.ts in tests, dist/src/app/index.js when built.
  for (const rel of ["../../package.json", "../../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "switchboard" && pkg.version) return pkg.version;
    } catch {
      // try the next location
    }
  }
  return "0.0.0";
}

export interface AppOptions {
  logger: Logger;
  role: "gateway" | "worker";
  /** Listen on HTTP (default true for the gateway role); tests may run a gateway without a port. */
  serve?: boolean;
  /** Overrides of gateway.host/port from the command line. */
  host?: string;
  port?: number;
  now?: () => number;
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
  start(): Promise<void>;
  stop(): Promise<void>;
}

async function createStore(
  loaded: LoadedConfig,
  stateDir: string,
  logger: Logger,
  redis: RedisConnections,
): Promise<StoreDriver> {
  const { storage } = loaded.config;
  if (storage.driver === "fs") return createFsStore({ stateDir, logger });
  const client = await redis.shared(storage.redisUrl, "config: storage.redisUrl");
  const { createRedisStore } = await import("../store/redis/index.js");
  return createRedisStore({ client, prefix: storage.prefix, logger, classifyKind });
}

async function createPipeline(
  loaded: LoadedConfig,
  stateDir: string,
  store: StoreDriver,
  logger: Logger,
  now: () => number,
  redis: RedisConnections,
): Promise<Pipeline> {
  const { queue } = loaded.config;
  if (queue.driver === "local") {
    return createLocalPipeline({
      stateDir,
      runs: store.runs,
      logger,
      concurrency: queue.concurrency,
      mode: queue.mode,
      now,
    });
  }
  const connection = await redis.shared(queue.redisUrl, "config: queue.redisUrl");
  const { createBullmqPipeline } = await import("../pipeline/bullmq/index.js");
  return createBullmqPipeline({
    connection,
    createBlockingConnection: () => redis.blocking(queue.redisUrl),
    // Own namespace: the store may use the same prefix on the same Redis (keys must never collide).
    prefix: `${queue.prefix}:queue`,
    runs: store.runs,
    logger,
    now,
    concurrency: queue.concurrency,
    mode: queue.mode,
    lockDurationMs: queue.lockDurationMs,
    stalledIntervalMs: queue.stalledIntervalMs,
  });
}

/**
 * The configured store alone, for CLI reads when no gateway runs. The fs driver takes the state
 * dir lock, so this refuses (CONFLICT) while a gateway owns the state.
 */
export async function openStore(
  loaded: LoadedConfig,
  logger: Logger,
): Promise<{ store: StoreDriver; close(): Promise<void> }> {
  const redis = new RedisConnections(logger);
  try {
    const store = await createStore(
      loaded,
      path.resolve(loaded.baseDir, loaded.config.stateDir),
      logger,
      redis,
    );
    return {
      store,
      async close() {
        await store.close();
        await redis.close();
      },
    };
  } catch (err) {
    await redis.close();
    throw err;
  }
}

type WebhookMount = {
  path: string;
  handle: (headers: WebhookHeaders, rawBody: string) => Promise<{ status: number; body?: unknown }>;
};

/** One adapter per configured account; webhooks to mount on the gateway port. */
/** Channel SDKs are imported only for configured channels (each costs tens of MB). */
export async function createChannels(
  config: LoadedConfig["config"],
  logger: Logger,
  dirs: { stateDir: string; baseDir: string },
): Promise<{ adapters: ChannelAdapter[]; hooks: WebhookMount[] }> {
  const adapters: ChannelAdapter[] = [];
  const hooks: WebhookMount[] = [];
  for (const [accountId, acc] of Object.entries(config.channels.telegram?.accounts ?? {})) {
    const tg = (await import("../../channels/telegram/index.js")).createTelegramChannel(
      { accountId, ...acc },
      { logger: logger.child({ channel: "telegram", accountId }) },
    );
    adapters.push(tg);
    if (acc.mode === "webhook") {
      hooks.push({
        path: `/hooks/telegram/${accountId}`,
        handle: async (headers, raw) => {
          let body: unknown;
          try {
            body = JSON.parse(raw);
          } catch {
            return { status: 400, body: { ok: false, error: "body is not JSON" } };
          }
          return tg.handleWebhook(headers, body);
        },
      });
    }
  }
  for (const [accountId, acc] of Object.entries(config.channels.slack?.accounts ?? {})) {
    const sl = (await import("../../channels/slack/index.js")).createSlackChannel(
      { accountId, ...acc },
      { logger: logger.child({ channel: "slack", accountId }) },
    );
    adapters.push(sl);
    if (acc.mode === "http")
      hooks.push({ path: `/hooks/slack/${accountId}/events`, handle: (h, raw) => sl.handleEvents(h, raw) });
  }
  for (const [accountId, acc] of Object.entries(config.channels.discord?.accounts ?? {})) {
    adapters.push(
      (await import("../../channels/discord/index.js")).createDiscordChannel(
        { accountId, ...acc },
        { logger: logger.child({ channel: "discord", accountId }) },
      ),
    );
  }
  for (const [accountId, acc] of Object.entries(config.channels.whatsapp?.accounts ?? {})) {
    adapters.push(
      (await import("../../channels/whatsapp/index.js")).createWhatsAppChannel(
        { accountId, ...(acc.authDir ? { authDir: path.resolve(dirs.baseDir, acc.authDir) } : {}) },
        { logger: logger.child({ channel: "whatsapp", accountId }), stateDir: dirs.stateDir },
      ),
    );
  }
  return { adapters, hooks };
}

const DEMO_NOTICE =
  "This gateway answers with the scripted demo model: no model is configured. Type help, or set models.default in switchboard.json5 (see README).";

export async function createApp(loaded: LoadedConfig, opts: AppOptions): Promise<App> {
  const { config } = loaded;
  const logger = opts.logger;
  const now = opts.now ?? Date.now;
  const host = opts.host ?? config.gateway.host;
  const port = opts.port ?? config.gateway.port;
  if (opts.role === "gateway" && !isLoopbackHost(host) && !config.gateway.auth.token) {
    throw new SwitchboardError(
      "CONFIG",
      `config: gateway.auth.token: required when gateway.host is not loopback (host is ${host}); set a token or bind to 127.0.0.1`,
    );
  }
  if (config.queue.driver === "local" && config.storage.driver === "redis") {
    throw new SwitchboardError(
      "CONFIG",
      'config: queue.driver: "local" keeps its journal on this machine; use queue.driver "bullmq" with storage.driver "redis"',
    );
  }
  if (opts.role === "worker" && config.queue.driver !== "bullmq") {
    throw new SwitchboardError(
      "CONFIG",
      'config: queue.driver: `switchboard worker` needs queue.driver "bullmq" (the local queue runs inside `switchboard start`)',
    );
  }
  const stateDir = path.resolve(loaded.baseDir, config.stateDir);
  const redis = new RedisConnections(logger);
  let store: StoreDriver;
  let pipeline: Pipeline;
  try {
    store = await createStore(loaded, stateDir, logger, redis);
    pipeline = await createPipeline(loaded, stateDir, store, logger, now, redis);
  } catch (err) {
    await redis.close();
    throw err;
  }
  const bus = new EventBus();
  const channels = new AdapterRegistry();
  const models = new ConfiguredModels(config, logger, loaded.baseDir);
  const partial = { config, store, channels, logger };
  const services: Services = {
    config,
    baseDir: loaded.baseDir,
    stateDir,
    logger,
    store,
    pipeline,
    bus,
    models,
    channels,
    delivery: new ChannelDelivery(partial),
    version: packageVersion(),
    now,
  };
  const tools = new ToolRegistry(allTools());
  const runtime = new AgentRuntime(services, tools);
  const handlers: HandlerRegistry = { afterTurn: [], background: {} };
  // Follow-up flows of the session tools: reply-back loop + announce (a2a), completion announces, archive.
  installSendFlow(services, handlers);
  installSpawnFlow(services, handlers);
  pipeline.onRunEvent((e) => bus.emit(e.type, { run: e.run }));

  const router: Router = createRouter(services);
  const { adapters, hooks } =
    opts.role === "gateway"
      ? await createChannels(config, logger, { stateDir, baseDir: loaded.baseDir })
      : { adapters: [], hooks: [] };
  for (const a of adapters) channels.add(a);
  const webchat =
    opts.role === "gateway" && config.channels.webchat.enabled
      ? createWebchatChannel(
          { ...(models.demo ? { notice: DEMO_NOTICE } : {}) },
          { logger: logger.child({ channel: "webchat" }) },
        )
      : null;
  if (webchat) {
    adapters.push(webchat);
    channels.add(webchat);
  }

  const rpc = new RpcDispatcher(logger);
  const health = async () => {
    const chans: Record<string, string> = {};
    // Details that need a person: a WhatsApp QR code to scan, a reconnect reason, a bad token.
    const details: Record<string, { state: string; detail: string }> = {};
    for (const a of channels.all()) {
      const st = a.status();
      chans[`${a.channel}:${a.accountId}`] = st.state;
      if (st.detail) details[`${a.channel}:${a.accountId}`] = { state: st.state, detail: st.detail };
    }
    return {
      ok: true,
      version: services.version,
      storage: store.name,
      queue: pipeline.driver,
      redis: await redis.status(),
      model: models.demo ? "scripted/demo (demo: no model configured)" : models.defaultModel,
      channels: chans,
      ...(Object.keys(details).length ? { channelDetails: details } : {}),
    };
  };
  registerMethods(rpc, { services, tools, health });

  const server =
    opts.role === "gateway" && opts.serve !== false
      ? new GatewayServer({
          host,
          port,
          ...(config.gateway.auth.token ? { token: config.gateway.auth.token } : {}),
          maxBodyBytes: config.gateway.maxBodyBytes,
          logger,
          rpc,
          bus,
          ...(webchat
            ? {
                page: () => webchat.page(),
                sockets: [{ path: "/webchat/ws", onConnection: (socket, q) => webchat.connect(socket, q.v) }],
              }
            : {}),
        })
      : null;
  for (const h of hooks) server?.registerHook(h.path, (req) => h.handle(req.headers, req.rawBody));

  let started = false;
  const app: App = {
    services,
    tools,
    runtime,
    rpc,
    server,
    handlers,
    router,
    address: null,
    async start() {
      if (started) return;
      started = true;
      await pipeline.start(createJobHandlers(services, runtime, handlers));
      if (server) app.address = await server.listen();
      for (const a of adapters) {
        await a.start(async (msg) => {
          await router.handle(msg);
        });
      }
    },
    async stop() {
      if (!started) return;
      started = false;
      await server?.close();
      for (const a of channels.all())
        await a.stop().catch((err) => logger.warn({ err }, "channel stop failed"));
      await pipeline.stop();
      await store.close();
      await redis.close();
    },
  };
  return app;
}
