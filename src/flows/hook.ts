import { type HandlerRegistry, onTurnEnd } from "../pipeline/handlers.js";
import type { Services } from "../services/index.js";
import { turnSpan } from "../telemetry/index.js";
import { deliverRoutedReply } from "./routed-reply.js";

/**
 * After a webhook turn (`POST /hooks/agent` with `deliver: true`): its reply goes to the chat the
 * hook named (`meta.hookDeliver`, pipeline/turn-meta.ts), through the send policy and the outbox
 * (`hook:<runId>`), unless it is silent.
 */

/** The reply goes out through delivery; a failed one is logged and kept on the run record. */
export type HookFlowDeps = Pick<Services, "delivery" | "logger" | "store">;

export function installHookFlow(services: HookFlowDeps, registry: HandlerRegistry): void {
  // A delivery bound to the run's reply (idempotent by `hook:<runId>`), done before the run is
  // final like the chat reply itself; it plans no follow-ups.
  onTurnEnd(registry, ["hook"], async function hookDelivery(job, outcome, { hookDeliver: route }) {
    if (!route || outcome.status !== "ok") return [];
    const res = await deliverRoutedReply(services, {
      policySessionKey: job.sessionKey,
      route: {
        channel: route.channel,
        to: route.to,
        ...(route.accountId ? { accountId: route.accountId } : {}),
        ...(route.threadId ? { threadId: route.threadId } : {}),
      },
      text: outcome.reply,
      idempotencyKey: `hook:${job.runId}`,
      traceparent: turnSpan(job),
    });
    if (res.failed) {
      services.logger.warn({ runId: job.runId, delivery: res.delivery }, "hook: reply not delivered");
      await services.store.runs.patch(job.runId, { deliveryError: res.delivery });
    }
    return [];
  });
}
