import { readFileSync } from "node:fs";
import path from "node:path";
import { ConfiguredModels } from "../agent/models.js";
import type { CircuitBreaker } from "../agent/providers/chain.js";
import type { LoadedConfig } from "../config/load.js";
import type { DeliveryHandoff } from "../delivery/handoff-bullmq.js";
import { SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";
import { hashTag, PipelineKeys } from "../pipeline/bullmq/keys.js";
import { createLocalPipeline } from "../pipeline/local/index.js";
import type { Pipeline } from "../pipeline/types.js";
import { RedisConnections } from "../redis/connections.js";
import { classifyKind } from "../sessions/keys.js";
import { createFsStore } from "../store/fs/index.js";
import type { StoreDriver } from "../store/types.js";
import { UsageCounter, type UsageCounts } from "../usage/counter.js";
import { type Ledger, MemoryLedger } from "../usage/ledger.js";
import { LiveRelay } from "./live-relay.js";

/**
 * Driver choice: the one place that turns `storage`, `queue` and `models` config into concrete
 * drivers. Everything above sees the interfaces (`StoreDriver`, `Pipeline`, `ModelRegistry`).
 */

export function packageVersion(): string {
  // src/app/drivers.ts in tests, dist/src/app/drivers.js when built.
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

/** Combinations the drivers cannot serve, refused before anything opens. */
export function checkDriverChoice(
  config: LoadedConfig["config"],
  role: "gateway" | "worker",
  host: string,
  isLoopback: (host: string) => boolean,
): void {
  if (role === "gateway" && !isLoopback(host) && !config.gateway.auth.token) {
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
  if (config.queue.driver === "local" && !config.queue.runTurns) {
    throw new SwitchboardError(
      "CONFIG",
      'config: queue.runTurns: false needs queue.driver "bullmq" (the local queue runs its turns in this process)',
    );
  }
  if (role === "worker" && config.queue.driver !== "bullmq") {
    throw new SwitchboardError(
      "CONFIG",
      'config: queue.driver: `switchboard worker` needs queue.driver "bullmq" (the local queue runs inside `switchboard start`)',
    );
  }
}

async function createStore(
  loaded: LoadedConfig,
  stateDir: string,
  logger: Logger,
  redis: RedisConnections,
): Promise<StoreDriver> {
  const { storage } = loaded.config;
  const tailCacheChars = storage.transcriptCacheChars;
  if (storage.driver === "fs") return createFsStore({ stateDir, logger, tailCacheChars });
  const client = await redis.shared(storage.redisUrl, "config: storage.redisUrl");
  const { createRedisStore } = await import("../store/redis/index.js");
  return createRedisStore({ client, prefix: storage.prefix, logger, classifyKind, tailCacheChars });
}

async function createPipeline(
  loaded: LoadedConfig,
  stateDir: string,
  store: StoreDriver,
  logger: Logger,
  now: () => number,
  redis: RedisConnections,
  role: "gateway" | "worker",
  live: LiveRelay | null,
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
    // a worker exists to run jobs; a gateway runs them too unless queue.runTurns says not to
    processJobs: role === "worker" || queue.runTurns,
    // one shared client per URL: the redis store on the queue's URL writes on this connection
    runsShareConnection:
      loaded.config.storage.driver === "redis" && loaded.config.storage.redisUrl === queue.redisUrl,
    ...(live ? { live } : {}),
  });
}

export interface Drivers {
  stateDir: string;
  redis: RedisConnections;
  store: StoreDriver;
  pipeline: Pipeline;
  models: ConfiguredModels;
  /** bullmq only: live events (deltas, typing, transcript) between workers and gateways. */
  live: LiveRelay | null;
  /** bullmq only: deliveries a worker (no channels) hands to the gateways. */
  handoff: DeliveryHandoff | null;
  /** Usage counts of finished turns (usage.get / usage.list), kept where the store is. */
  usage: UsageCounts;
}

/** Store, pipeline and model providers for the config; Redis connections close if a driver fails to open. */
export async function createDrivers(
  loaded: LoadedConfig,
  logger: Logger,
  now: () => number,
  role: "gateway" | "worker",
): Promise<Drivers> {
  const stateDir = path.resolve(loaded.baseDir, loaded.config.stateDir);
  const redis = new RedisConnections(logger);
  let store: StoreDriver;
  let pipeline: Pipeline;
  let live: LiveRelay | null;
  try {
    store = await createStore(loaded, stateDir, logger, redis);
    live = await createLiveRelay(loaded, logger, redis);
    pipeline = await createPipeline(loaded, stateDir, store, logger, now, redis, role, live);
  } catch (err) {
    await redis.close();
    throw err;
  }
  const models = new ConfiguredModels(loaded.config, logger, loaded.baseDir, {
    now,
    ...(await createBreaker(loaded, redis, now)),
  });
  return {
    stateDir,
    redis,
    store,
    pipeline,
    models,
    live,
    handoff: await createHandoff(loaded, logger, redis),
    usage: await createUsageCounts(loaded, store, logger, now, redis),
  };
}

/**
 * Usage counts that survive restarts: in the fs store's kv (written every 2 s and on shutdown),
 * or in Redis under the store prefix, where every gateway and worker counts into the same totals.
 */
async function createUsageCounts(
  loaded: LoadedConfig,
  store: StoreDriver,
  logger: Logger,
  now: () => number,
  redis: RedisConnections,
): Promise<UsageCounts> {
  const { storage } = loaded.config;
  if (storage.driver === "fs") return UsageCounter.open({ kv: store.kv, now, logger });
  const client = await redis.shared(storage.redisUrl, "config: storage.redisUrl");
  const [{ RedisUsageCounts }, { RedisKeys }] = await Promise.all([
    import("../usage/redis-counts.js"),
    import("../store/redis/keys.js"),
  ]);
  return new RedisUsageCounts(client, new RedisKeys(storage.prefix), { now, logger });
}

/**
 * The failover circuit breaker: in memory for the local queue (one process runs every turn), in
 * Redis for bullmq (every worker skips the same model and one of them probes it).
 */
async function createBreaker(
  loaded: LoadedConfig,
  redis: RedisConnections,
  now: () => number,
): Promise<{ breaker?: CircuitBreaker }> {
  const { queue, models } = loaded.config;
  if (queue.driver !== "bullmq") return {};
  const client = await redis.shared(queue.redisUrl, "config: queue.redisUrl");
  const { RedisBreaker } = await import("../agent/providers/breaker-redis.js");
  return { breaker: new RedisBreaker(client, `${queue.prefix}:failover`, models.failover, now) };
}

/**
 * The budget ledger (API.md §8.4): in memory for the local queue (one process admits and runs
 * every turn), in Redis for bullmq (every gateway admits and every worker reserves against the
 * same accounts, under the queue's prefix).
 */
export async function createLedger(
  config: LoadedConfig["config"],
  redis: RedisConnections,
  now: () => number,
  counts: UsageCounts,
): Promise<Ledger> {
  const { queue } = config;
  if (queue.driver !== "bullmq") {
    // This period's spend so far comes from the usage counts, which outlive the process: a
    // restart must not give every budget its whole limit again.
    const ledger = new MemoryLedger(now);
    for (const b of config.usage.budgets) {
      const t = await counts.get(b.scope, b.period);
      ledger.seed(b.scope, b.period, { costUsd: t.costUsd, tokens: t.tokens.input + t.tokens.output });
    }
    return ledger;
  }
  const client = await redis.shared(queue.redisUrl, "config: queue.redisUrl");
  const { RedisLedger } = await import("../usage/redis-ledger.js");
  return new RedisLedger(client, `${queue.prefix}:`, now);
}

async function createHandoff(
  loaded: LoadedConfig,
  logger: Logger,
  redis: RedisConnections,
): Promise<DeliveryHandoff | null> {
  const { queue } = loaded.config;
  if (queue.driver !== "bullmq") return null;
  const { DeliveryHandoff } = await import("../delivery/handoff-bullmq.js");
  return new DeliveryHandoff({
    connection: await redis.shared(queue.redisUrl, "config: queue.redisUrl"),
    createBlockingConnection: () => redis.blocking(queue.redisUrl),
    prefix: hashTag(`${queue.prefix}:queue`),
    logger,
    lockDurationMs: queue.lockDurationMs,
    stalledIntervalMs: queue.stalledIntervalMs,
  });
}

async function createLiveRelay(
  loaded: LoadedConfig,
  logger: Logger,
  redis: RedisConnections,
): Promise<LiveRelay | null> {
  const { queue } = loaded.config;
  if (queue.driver !== "bullmq") return null;
  const keys = new PipelineKeys(`${queue.prefix}:queue`);
  return new LiveRelay({
    publisher: await redis.shared(queue.redisUrl, "config: queue.redisUrl"),
    createSubscriber: () => redis.blocking(queue.redisUrl),
    channel: keys.live,
    audienceKey: keys.liveAudience,
    logger,
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
