import { z } from "zod";
import type { HandlerRegistry } from "../pipeline/handlers.js";
import type { Services } from "../services/index.js";
import { deliverRoutedReply } from "./routed-reply.js";

/**
 * After a webhook turn (`POST /hooks/agent` with `deliver: true`): its reply goes to the chat the
 * hook named, through the send policy and the outbox (`hook:<runId>`), unless it is silent.
 */

export const hookDeliverSchema = z.object({
  channel: z.string().min(1),
  to: z.string().min(1),
  accountId: z.string().min(1).optional(),
  threadId: z.string().min(1).optional(),
});

export type HookDeliver = z.infer<typeof hookDeliverSchema>;

/** The reply goes out through delivery; a failed one is logged and kept on the run record. */
export type HookFlowDeps = Pick<Services, "delivery" | "logger" | "store">;

export function installHookFlow(services: HookFlowDeps, registry: HandlerRegistry): void {
  // A delivery bound to the run's reply (idempotent by `hook:<runId>`), done before the run is
  // final like the chat reply itself; it plans no follow-ups.
  registry.afterTurn.push(async function hookDelivery(job, outcome) {
    for (const m of job.messages) {
      const raw = m.meta?.hookDeliver;
      if (raw === undefined || outcome.status !== "ok") continue;
      const route = hookDeliverSchema.safeParse(raw);
      if (!route.success) {
        services.logger.warn({ runId: m.runId }, "hook: malformed delivery metadata; reply not posted");
        continue;
      }
      const res = await deliverRoutedReply(services, {
        policySessionKey: job.sessionKey,
        route: {
          channel: route.data.channel,
          to: route.data.to,
          ...(route.data.accountId ? { accountId: route.data.accountId } : {}),
          ...(route.data.threadId ? { threadId: route.data.threadId } : {}),
        },
        text: outcome.reply,
        idempotencyKey: `hook:${m.runId}`,
      });
      if (res.failed) {
        services.logger.warn({ runId: m.runId, delivery: res.delivery }, "hook: reply not delivered");
        await services.store.runs.patch(m.runId, { deliveryError: res.delivery });
      }
    }
    return [];
  });
}
