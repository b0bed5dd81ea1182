/**
 * The Redis store driver: every durable record in one Redis (or one Cluster slot), for
 * deployments that run the `bullmq` pipeline or several gateway processes. Key layout:
 * `keys.ts`; atomic multi-key writes: `commands/` (one Lua script per file).
 *
 * Not in here: creating or closing the connection (the composition root owns the client;
 * `close()` only stops this driver's own work and never quits it), and Redis configuration
 * checks such as `maxmemory-policy noeviction` (doctor / start-up checks).
 */
import type { Redis } from "ioredis";
import { z } from "zod";
import { DEFAULT_TAIL_CACHE_CHARS } from "../../config/schema.js";
import { formatIssues, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { STORE_SCRIPTS } from "../../redis/commands/store.js";
import { ScriptRunner } from "../../redis/scripts.js";
import { defaultClassifyKind } from "../kind.js";
import type { SessionKind, StoreDriver } from "../types.js";
import { RedisKeys } from "./keys.js";
import { RedisKeyValueStore } from "./kv.js";
import { RedisOutboxStore } from "./outbox.js";
import { RedisRunStore } from "./runs.js";
import { RedisSessionStore } from "./sessions.js";
import { RedisTranscriptStore } from "./transcripts.js";
import { WarningSink } from "./warnings.js";

export type { ParsedKey } from "./keys.js";
export { RedisKeys } from "./keys.js";
export { RedisKeyValueStore } from "./kv.js";
export { RedisOutboxStore } from "./outbox.js";
export { RedisRunStore } from "./runs.js";
export { RedisSessionStore } from "./sessions.js";
export { RedisTranscriptStore } from "./transcripts.js";

export const redisStoreOptionsSchema = z.object({
  /** Namespace of every key; becomes the Cluster hash tag `{prefix}`. No braces or whitespace. */
  prefix: z
    .string()
    .min(1)
    .regex(/^[^{}\s]+$/, "must not contain braces or whitespace"),
  /** Finished runs (ok/error/timeout/aborted) expire this long after their last write; 0 keeps them. Default 7 days. */
  finishedRunTtlMs: z
    .number()
    .int()
    .nonnegative()
    .default(7 * 24 * 60 * 60 * 1000),
  /**
   * Characters of transcript JSON kept in this process's memory as the newest messages of
   * recently read streams; a read then fetches only the entries added since (by any process),
   * checked against the stream's length. 0 turns the cache off.
   */
  tailCacheChars: z.number().int().min(0).default(DEFAULT_TAIL_CACHE_CHARS),
});

export interface RedisStoreOptions extends z.input<typeof redisStoreOptionsSchema> {
  /** ioredis client, created and closed by the composition root; this driver never quits it. */
  client: Redis;
  logger: Logger;
  /** Session kind of a key, for `list({ kinds })`; default: the routing module's SEMANTICS §1 rule. */
  classifyKind?: (key: string) => SessionKind;
  /** Clock in ms (activeMinutes, archive names); default Date.now. */
  now?: () => number;
}

export class RedisStore implements StoreDriver {
  readonly name = "redis" as const;
  private closing: Promise<void> | null = null;

  constructor(
    readonly keys: RedisKeys,
    readonly sessions: RedisSessionStore,
    readonly transcripts: RedisTranscriptStore,
    readonly runs: RedisRunStore,
    readonly outbox: RedisOutboxStore,
    readonly kv: RedisKeyValueStore,
    private readonly sink: WarningSink,
  ) {}

  /** Unreadable records met so far (health, doctor). */
  warnings(): string[] {
    return this.sink.all();
  }

  /** Waits for this process's queued writes; leaves the client open. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.all([this.sessions.close(), this.transcripts.close(), this.runs.close()]);
    })();
    return this.closing;
  }
}

/** Checks the options, loads the Lua scripts (one round trip) and returns the driver. */
export async function createRedisStore(opts: RedisStoreOptions): Promise<RedisStore> {
  const parsed = redisStoreOptionsSchema.safeParse({
    prefix: opts.prefix,
    finishedRunTtlMs: opts.finishedRunTtlMs,
    tailCacheChars: opts.tailCacheChars,
  });
  if (!parsed.success)
    throw new SwitchboardError("CONFIG", formatIssues(parsed.error.issues, "redis store: "));
  if (typeof opts.client?.evalsha !== "function") {
    throw new SwitchboardError("CONFIG", "redis store: client: must be an ioredis client");
  }
  const { client } = opts;
  const o = parsed.data;
  const logger = opts.logger.child({ component: "store.redis" });
  const now = opts.now ?? Date.now;
  const keys = new RedisKeys(o.prefix);
  const scripts = new ScriptRunner(client);
  await scripts.load(STORE_SCRIPTS);
  const warnings = new WarningSink(logger);
  const common = { client, keys, scripts, warnings };
  const store = new RedisStore(
    keys,
    new RedisSessionStore({ ...common, classifyKind: opts.classifyKind ?? defaultClassifyKind, now }),
    new RedisTranscriptStore({ ...common, now, tailCacheChars: o.tailCacheChars }),
    new RedisRunStore({ ...common, finishedRunTtlMs: o.finishedRunTtlMs }),
    new RedisOutboxStore(client, keys, scripts, now),
    new RedisKeyValueStore(client, keys, warnings),
    warnings,
  );
  logger.debug({ prefix: o.prefix }, "redis store ready");
  return store;
}
