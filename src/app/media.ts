import path from "node:path";
import type { MediaSink } from "../channels/types.js";
import { channelSettings } from "../config/channels.js";
import { parseDurationMs } from "../config/schedule.js";
import type { Config } from "../config/schema.js";
import type { Logger } from "../log.js";
import { FsMediaStore } from "../media/fs/store.js";
import { StoreMediaSink } from "../media/sink.js";
import type { MediaStore } from "../media/types.js";

/** Driver choice for the media store (`media.store.driver`), and the sink every adapter gets. */

const MiB = 1024 * 1024;
/** How often the store is pruned of files past `media.store.retention`. */
const PRUNE_EVERY_MS = 60 * 60 * 1000;

/** The S3 store (and `@aws-sdk/client-s3`) is imported only when configured: start-up skips it. */
export async function createMediaStore(
  config: Config,
  stateDir: string,
  baseDir: string,
  now: () => number = Date.now,
): Promise<MediaStore> {
  const { store } = config.media;
  const retentionMs = parseDurationMs(store.retention) ?? 7 * 24 * 3600_000;
  const dir = store.dir ? path.resolve(baseDir, store.dir) : path.join(stateDir, "media");
  if (store.driver === "s3" && store.s3) {
    const s3 = store.s3;
    const { S3MediaStore } = await import("../media/s3/store.js");
    return new S3MediaStore({
      bucket: s3.bucket,
      prefix: s3.prefix,
      region: s3.region,
      forcePathStyle: s3.forcePathStyle,
      ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
      ...(s3.accessKeyId ? { accessKeyId: s3.accessKeyId } : {}),
      ...(s3.secretAccessKey ? { secretAccessKey: s3.secretAccessKey } : {}),
      spoolDir: path.join(stateDir, "media-spool"),
      retentionMs,
      now,
    });
  }
  return new FsMediaStore(dir, retentionMs, now);
}

/** `channels.<name>.mediaMaxMb` in bytes (decimals allowed), or undefined for an unknown channel. */
export function channelMaxBytes(config: Config, channel: string): number | undefined {
  const c = channelSettings(config, channel);
  return c?.mediaMaxMb !== undefined ? Math.floor(c.mediaMaxMb * MiB) : undefined;
}

export function createMediaSink(config: Config, store: MediaStore, logger: Logger): MediaSink {
  return new StoreMediaSink(store, config.media, logger, {
    channelMaxBytes: (channel) => channelMaxBytes(config, channel),
  });
}

/** Prunes now and then every hour (unref'd); returns the stop function. */
export function schedulePrune(store: MediaStore, logger: Logger): () => void {
  const run = () =>
    void store
      .prune()
      .then((n) => n > 0 && logger.info({ removed: n }, "media: pruned files past retention"))
      .catch((err: unknown) => logger.warn({ err }, "media: prune failed"));
  run();
  const timer = setInterval(run, PRUNE_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
