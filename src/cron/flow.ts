import { z } from "zod";
import { deliverRoutedReply } from "../flows/routed-reply.js";
import type { HandlerRegistry } from "../pipeline/handlers.js";
import type { Services } from "../services/index.js";
import { type CronService, type CronTurnMeta, deliveryFromKey } from "./service.js";

/**
 * What runs after a cron turn: the reply goes to the job's delivery target (explicit chat, or the
 * creating session's last chat), then the run log, failure count / backoff and `at` deletion.
 * Runs wherever the turn ran (any worker); idempotent by run id.
 */

const metaSchema: z.ZodType<CronTurnMeta> = z.object({
  jobId: z.string().min(1),
  tickAt: z.number(),
  trigger: z.enum(["schedule", "catch-up", "manual", "retry"]),
});

/** The reply goes out through delivery; malformed metadata and failed deliveries are logged. */
export type CronFlowDeps = Pick<Services, "delivery" | "logger">;

export function installCronFlow(services: CronFlowDeps, registry: HandlerRegistry, cron: CronService): void {
  // Effects bound to the run (delivery keyed `cron:<runId>`, the run log) done before the run is
  // final, like the chat reply; idempotent, so a re-run after a crash repeats them harmlessly.
  registry.afterTurn.push(async function cronFinish(job, outcome) {
    for (const m of job.messages) {
      if (m.meta?.cron === undefined) continue;
      const parsed = metaSchema.safeParse(m.meta.cron);
      if (!parsed.success) {
        services.logger.warn({ runId: m.runId }, "cron: malformed turn metadata; no follow-up");
        continue;
      }
      // A turn aborted by a shutdown is re-run after the restart and finishes then.
      if (outcome.status === "aborted") continue;
      const meta = parsed.data;
      const j = await cron.getJob(meta.jobId);
      let delivery: string | undefined;
      if (j && outcome.status === "ok" && j.job.delivery.mode === "announce") {
        const d = j.job.delivery;
        const res = await deliverRoutedReply(services, {
          text: outcome.reply,
          idempotencyKey: `cron:${m.runId}`,
          ...(d.to === "last"
            ? { policySessionKey: deliveryFromKey(j.job) ?? job.sessionKey }
            : {
                policySessionKey: job.sessionKey,
                route: {
                  channel: d.channel ?? "",
                  to: d.to ?? "",
                  ...(d.accountId ? { accountId: d.accountId } : {}),
                  ...(d.threadId ? { threadId: d.threadId } : {}),
                },
              }),
        });
        delivery = res.delivery;
        if (res.failed)
          services.logger.warn({ runId: m.runId, jobId: meta.jobId, delivery }, "cron: reply not delivered");
      }
      await cron.finish(meta, {
        runId: m.runId,
        sessionKey: job.sessionKey,
        status: outcome.status,
        ...(outcome.reply !== undefined ? { reply: outcome.reply } : {}),
        ...(outcome.error ? { error: outcome.error } : {}),
        ...(delivery ? { delivery } : {}),
      });
    }
    return [];
  });
}
