import { DEFAULT_FAILURE_TEXT } from "../config/schema.js";
import { routeOf, streamingMode } from "../delivery/index.js";
import { startTyping } from "../delivery/typing.js";
import { errorMessage, isConnectionError } from "../errors.js";
import { type HandlerRegistry, isSkipToken } from "../pipeline/handlers.js";
import type { JobHandlers, TurnJob } from "../pipeline/types.js";
import { backoffDelayMs, retryLoop } from "../retry/index.js";
import type { DeliveryOutcome, ReplyStream, Services } from "../services.js";
import type { AgentRuntime, TurnOutcome, TurnStreaming } from "./runtime.js";

/**
 * Wraps the runtime for the pipeline: typing while a turn runs, the reply streamed into the chat
 * as an edited preview where the channel allows (delivery/stream.ts), delivery of the final reply
 * (idempotent by runId), the failure line when the turn fails, then follow-up hooks (reply-back
 * loop, completion announces).
 */

/** Retries of a follow-up that failed because storage or queue was unavailable (~8 s in all). */
const HOOK_RETRIES = 4;

interface ChatSide {
  streaming: TurnStreaming;
  stream: ReplyStream | null;
  failureText: string;
}

async function chatSide(services: Services, job: TurnJob): Promise<ChatSide> {
  const entry = await services.store.sessions.get(job.sessionKey).catch(() => null);
  const route = entry ? routeOf(entry) : null;
  const channelCfg = route
    ? (services.config.channels as Record<string, { failureText?: string } | undefined>)[route.channel]
    : undefined;
  const failureText = channelCfg?.failureText ?? DEFAULT_FAILURE_TEXT;
  const mode = route ? streamingMode(services.config, route.channel) : "partial";
  if (mode === "off") return { streaming: { enabled: false }, stream: null, failureText };
  const stream =
    job.deliver && mode === "partial" && services.delivery.openStream
      ? await services.delivery.openStream({
          sessionKey: job.sessionKey,
          idempotencyKey: `reply:${job.runId}`,
        })
      : null;
  return {
    streaming: stream ? { onDelta: (d) => stream.push(d), onReset: () => stream.reset() } : {},
    stream,
    failureText,
  };
}

export function createJobHandlers(
  services: Services,
  runtime: AgentRuntime,
  registry: HandlerRegistry,
): JobHandlers {
  return {
    async turn(job, ctx) {
      const stopTyping = await startTyping(services, job.runId, job.sessionKey, job.deliver);
      let side: ChatSide | undefined;
      let outcome: TurnOutcome;
      try {
        side = await chatSide(services, job);
        outcome = await runtime.runTurn(job, ctx, side.streaming);
      } catch (err) {
        await side?.stream?.close();
        throw err;
      } finally {
        await stopTyping();
      }
      const stream = side.stream;
      if (job.deliver && outcome.status === "ok" && outcome.reply && !isSkipToken(outcome.reply)) {
        if (await ctx.stillOwner()) {
          const res: DeliveryOutcome = stream
            ? await stream.finish(outcome.reply)
            : await services.delivery.deliver({
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
        } else await stream?.close();
      } else {
        await stream?.close();
        // A failed turn tells the person in one plain line; the cause is in the run record and the log.
        if (
          job.deliver &&
          (outcome.status === "error" || outcome.status === "timeout") &&
          (await ctx.stillOwner())
        ) {
          services.logger.warn(
            { runId: job.runId, sessionKey: job.sessionKey, status: outcome.status, error: outcome.error },
            "turn failed; telling the chat",
          );
          const res = await services.delivery.deliver({
            sessionKey: job.sessionKey,
            text: side.failureText,
            idempotencyKey: `failure:${job.runId}`,
            kind: "failure",
          });
          if (res.status === "failed")
            services.logger.warn({ runId: job.runId, why: res.error }, "failure line not delivered");
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
