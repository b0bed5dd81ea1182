import { errorMessage } from "../../errors.js";
import type { DriverContext } from "./context.js";
import { outboxEntrySchema, parseStored } from "./schema.js";

/**
 * The relay of the transactional outbox: follow-ups committed with a run's final status
 * (`commitTurn-3` pushed them onto `{tag}:outbox` in the same script that wrote the outcome) are
 * submitted here — the job with its deterministic BullMQ id, the turn with its runId, both
 * idempotent — and only then removed from the list. It runs right after a commit (that turn's
 * entries), at worker start and on every sweep (all entries), so a worker that died between the
 * commit and the relay loses nothing: another worker relays its entries, and a duplicate relay
 * (two workers at once) is a no-op thanks to the ids.
 */

/** Entries relayed per sweep at most; the next sweep takes the rest. */
const SWEEP_BATCH = 500;

/** Relays `entries` (the exact strings in the list), or the oldest entries of the list. */
export async function relayOutbox(ctx: DriverContext, entries?: readonly string[]): Promise<number> {
  const { redis, keys, logger } = ctx;
  const list = entries ?? (await redis.lrange(keys.outbox, 0, SWEEP_BATCH - 1));
  let relayed = 0;
  for (const raw of list) {
    if (ctx.stopping()) break;
    const entry = parseStored(outboxEntrySchema, raw);
    if (!entry) {
      logger.error({ entry: raw.slice(0, 200) }, "bullmq pipeline: outbox entry unreadable; dropped");
      await redis.lrem(keys.outbox, 1, raw);
      continue;
    }
    try {
      await ctx.submitFollowUp(entry.followUp);
    } catch (err) {
      // Stays in the list: the next sweep (of any worker) tries again.
      if (ctx.stopping()) break;
      logger.warn(
        { err: errorMessage(err), runId: entry.from, type: entry.followUp.type },
        "bullmq pipeline: submitting a follow-up failed; the sweep retries it",
      );
      break;
    }
    await redis.lrem(keys.outbox, 1, raw);
    relayed++;
  }
  return relayed;
}

/** `relayOutbox` that logs instead of throwing (after a commit, at start, on the sweep). */
export async function relayQuietly(ctx: DriverContext, entries?: readonly string[]): Promise<void> {
  try {
    await relayOutbox(ctx, entries);
  } catch (err) {
    ctx.logger.warn({ err: errorMessage(err) }, "bullmq pipeline: outbox relay failed; the sweep retries");
  }
}
