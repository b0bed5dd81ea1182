import { deliverRoutedReply } from "../flows/routed-reply.js";
import { type HandlerRegistry, onTurnEnd } from "../pipeline/handlers.js";
import type { Services } from "../services/index.js";
import { turnSpan } from "../telemetry/index.js";
import { type CronService, deliveryFromKey } from "./service.js";

/**
 * What runs after a cron turn: the reply goes to the job's delivery target (explicit chat, or the
 * creating session's last chat), then the run log, failure count / backoff and `at` deletion.
 * Runs wherever the turn ran (any worker); idempotent by run id.
 */

/** The reply goes out through delivery; failed deliveries are logged. */
export type CronFlowDeps = Pick<Services, "delivery" | "logger">;

export function installCronFlow(services: CronFlowDeps, registry: HandlerRegistry, cron: CronService): void {
  // Effects bound to the run (delivery keyed `cron:<runId>`, the run log) done before the run is
  // final, like the chat reply; idempotent, so a re-run after a crash repeats them harmlessly.
  onTurnEnd(registry, ["cron"], async function cronFinish(job, outcome, { cron: meta }) {
    // A turn aborted by a shutdown is re-run after the restart and finishes then.
    if (outcome.status === "aborted") return [];
    const j = await cron.getJob(meta.jobId);
    let delivery: string | undefined;
    if (j && outcome.status === "ok" && j.job.delivery.mode === "announce") {
      const d = j.job.delivery;
      const res = await deliverRoutedReply(services, {
        text: outcome.reply,
        idempotencyKey: `cron:${job.runId}`,
        traceparent: turnSpan(job),
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
        services.logger.warn({ runId: job.runId, jobId: meta.jobId, delivery }, "cron: reply not delivered");
    }
    await cron.finish(meta, {
      runId: job.runId,
      sessionKey: job.sessionKey,
      status: outcome.status,
      ...(outcome.reply !== undefined ? { reply: outcome.reply } : {}),
      ...(outcome.error ? { error: outcome.error } : {}),
      ...(delivery ? { delivery } : {}),
    });
    return [];
  });
}
