import { routeOf } from "../delivery/index.js";
import { errorMessage, isConnectionError } from "../errors.js";
import { type HandlerRegistry, isSkipToken } from "../pipeline/handlers.js";
import type { JobHandlers } from "../pipeline/types.js";
import { backoffDelayMs, retryLoop } from "../retry/index.js";
import type { Services } from "../services.js";
import type { AgentRuntime, TurnOutcome } from "./runtime.js";

/**
 * Wraps the runtime for the pipeline: typing indicator while a turn runs, delivery of the final
 * reply (idempotent by runId), then follow-up hooks (reply-back loop, completion announces).
 */

const TYPING_REFRESH_MS = 4000;
/** Retries of a follow-up that failed because storage or queue was unavailable (~8 s in all). */
const HOOK_RETRIES = 4;

async function startTyping(services: Services, sessionKey: string): Promise<() => void> {
  const entry = await services.store.sessions.get(sessionKey);
  const route = entry ? routeOf(entry) : null;
  const adapter = route ? services.channels.get(route.channel, route.accountId) : undefined;
  if (!route || !adapter?.sendTyping || !adapter.capabilities.typing) return () => {};
  const send = () => adapter.sendTyping?.(route.to, route.threadId).catch(() => {});
  void send();
  const timer = setInterval(send, TYPING_REFRESH_MS);
  timer.unref();
  return () => clearInterval(timer);
}

export function createJobHandlers(
  services: Services,
  runtime: AgentRuntime,
  registry: HandlerRegistry,
): JobHandlers {
  return {
    async turn(job, ctx) {
      const stopTyping = job.deliver ? await startTyping(services, job.sessionKey) : () => {};
      let outcome: TurnOutcome;
      try {
        outcome = await runtime.runTurn(job, ctx);
      } finally {
        stopTyping();
      }
      if (job.deliver && outcome.status === "ok" && outcome.reply && !isSkipToken(outcome.reply)) {
        if (await ctx.stillOwner()) {
          const res = await services.delivery.deliver({
            sessionKey: job.sessionKey,
            text: outcome.reply,
            idempotencyKey: `reply:${job.runId}`,
          });
          if (res.status === "failed" || res.status === "blocked" || res.status === "no-route") {
            const why = "error" in res ? res.error : res.reason;
            services.logger.warn(
              { runId: job.runId, sessionKey: job.sessionKey, why },
              "reply not delivered",
            );
            outcome.deliveryError = why;
          }
        }
      }
      // Follow-ups (reply-back, announces, wake-ups) run before the run is finalised, so a crash
      // here re-runs the turn and them (their ids are deterministic: nothing is done twice). A
      // hook that keeps failing is never swallowed: the run does not end "ok" without them.
      const failures: string[] = [];
      for (const [i, hook] of registry.afterTurn.entries()) {
        try {
          await retryLoop(() => hook(job, outcome), {
            delayFor: (err, attempt) =>
              isConnectionError(err) && attempt < HOOK_RETRIES
                ? backoffDelayMs(attempt, { baseDelayMs: 200, maxDelayMs: 4000 })
                : undefined,
            signal: ctx.signal,
            onRetry: ({ retry, delayMs, err }) =>
              services.logger.warn(
                { err: errorMessage(err), runId: job.runId, hook: hook.name || i, retry, delayMs },
                "after-turn follow-up failed; retrying",
              ),
          });
        } catch (err) {
          services.logger.error(
            { err, runId: job.runId, hook: hook.name || i },
            "after-turn follow-up failed",
          );
          failures.push(`${hook.name || `hook ${i}`}: ${errorMessage(err)}`);
        }
      }
      if (failures.length > 0 && outcome.status === "ok") {
        return {
          ...outcome,
          status: "error",
          error: `the turn finished but its follow-up failed (${failures.join("; ")})`,
        };
      }
      return outcome;
    },
    async background(job, ctx) {
      const handler = registry.background[job.kind];
      if (!handler) {
        services.logger.warn({ kind: job.kind, id: job.id }, "no handler for background job; dropped");
        return;
      }
      await handler(job, ctx);
    },
  };
}
