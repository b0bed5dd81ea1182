import type { LoadedConfig } from "../config/load.js";
import type { Logger } from "../log.js";
import type { CronDriver } from "../services/cron.js";
import type { StoreDriver } from "../store/types.js";
import type { Drivers } from "./drivers.js";

/**
 * The cron driver for the queue driver (API.md §7): the embedded scheduler with the local queue
 * (next ticks journaled in the store's kv, i.e. the state dir), BullMQ job schedulers with bullmq.
 * Both are imported only when used.
 */
export async function createCronDriver(
  loaded: LoadedConfig,
  drivers: Pick<Drivers, "redis"> & { store: StoreDriver },
  logger: Logger,
  now: () => number,
): Promise<CronDriver> {
  const { queue } = loaded.config;
  const log = logger.child({ component: "cron" });
  if (queue.driver === "local") {
    const { LocalCronDriver } = await import("../cron/local.js");
    return new LocalCronDriver({
      kv: drivers.store.kv,
      logger: log,
      clock: {
        now,
        setTimer: (fn, ms) => {
          const t = setTimeout(fn, ms);
          t.unref();
          return () => clearTimeout(t);
        },
      },
    });
  }
  const connection = await drivers.redis.shared(queue.redisUrl, "config: queue.redisUrl");
  const [{ BullmqCronDriver }, { hashTag }] = await Promise.all([
    import("../cron/bullmq.js"),
    import("../pipeline/bullmq/keys.js"),
  ]);
  return new BullmqCronDriver({
    connection,
    createBlockingConnection: () => drivers.redis.blocking(queue.redisUrl),
    // The pipeline's hash tag: cron keys sit in the same Cluster slot as the queue's.
    prefix: hashTag(`${queue.prefix}:queue`),
    logger: log,
    now,
  });
}
