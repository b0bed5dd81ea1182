import { SwitchboardError } from "../../errors.js";
import type { Middleware } from "../compose.js";
import type { InboundCtx } from "../context.js";

/**
 * Platforms redeliver (webhook retries, reconnects): a message id is processed once per
 * channel + account + chat. Accepted or not seen: claim (a short lease while this message is
 * being accepted), accept (the rest of the chain journals it), mark (a long-lived record) —
 * and when a later step throws, the claim is released so the platform's redelivery is taken.
 * A redelivery that arrives while the first copy is still being accepted gets UNAVAILABLE (the
 * platform retries) rather than being dropped: the first copy may yet fail. Should the mark
 * itself be lost, the run id derived from the same identity (`inboundRunId`) makes the
 * pipeline's idempotent submit the dedupe.
 */
const DEDUPE_TTL_MS = 24 * 3600_000;
/**
 * Longer than an accept takes (a few Redis round trips); after a crash mid-accept a redelivery
 * waits at most this long. Kept shorter than a channel lease (`gateway.leases.ttlMs`, ≥ 500 ms,
 * 10 s by default) plus its renewal, so the gateway taking over a dead one's account never waits
 * for it (issue 50: 30 s here held a Telegram takeover for 30 s). Should an accept outlast it,
 * the run id derived from the message (`inboundRunId`) still makes the second copy a no-op.
 */
const ACCEPT_LEASE_MS = 2000;

export function inboundDedupeId(msg: InboundCtx["msg"]): string {
  // Message ids are unique per chat on Telegram and Slack, so the chat is part of the key.
  return `inbound:${msg.channel}:${msg.accountId}:${msg.peerId}:${msg.messageId}`;
}

export const dedupe: Middleware<InboundCtx> = async (ctx, next) => {
  const id = inboundDedupeId(ctx.msg);
  const outbox = ctx.services.store.outbox;
  if (!(await outbox.claim(id, ACCEPT_LEASE_MS))) {
    if ((await outbox.get(id))?.state === "claimed") {
      throw new SwitchboardError(
        "UNAVAILABLE",
        `message ${ctx.msg.messageId} is being accepted right now; deliver it again later`,
      );
    }
    ctx.dropped = "duplicate";
    return;
  }
  try {
    await next();
  } catch (err) {
    await outbox.release(id).catch((e: unknown) => {
      ctx.services.logger.warn(
        { err: e, channel: ctx.msg.channel, messageId: ctx.msg.messageId },
        "inbound dedupe: could not release the claim; a redelivery is taken once it expires",
      );
    });
    throw err;
  }
  await outbox.complete(id, { messageIds: [] }, DEDUPE_TTL_MS).catch((e: unknown) => {
    // accepted already; a redelivery then resubmits the same run id, which the pipeline ignores
    ctx.services.logger.warn(
      { err: e, channel: ctx.msg.channel, messageId: ctx.msg.messageId },
      "inbound dedupe: could not record the message as seen",
    );
  });
};
