import { channelSettings } from "../config/channels.js";
import { DEFAULT_FAILURE_TEXT } from "../config/schema.js";
import { streamingMode } from "../delivery/index.js";
import { startTyping } from "../delivery/typing.js";
import { errorMessage, isConnectionError } from "../errors.js";
import { partsFromMeta } from "../media/parts.js";
import { synthesize, wantsSpeech } from "../media/speech.js";
import { type HandlerRegistry, isSkipToken } from "../pipeline/handlers.js";
import type { FollowUp, JobHandlers, TurnJob, TurnOutcome } from "../pipeline/types.js";
import { backoffDelayMs, retryLoop } from "../retry/index.js";
import type { DeliveryOutcome, ReplyStream, Services } from "../services/index.js";
import { routeOf } from "../sessions/route.js";
import { ensureSession } from "../sessions/service.js";
import type { SessionEntry } from "../store/types.js";
import { observeTurn, withinLink } from "../telemetry/index.js";
import type { AgentRuntime, TurnStreaming } from "./runtime.js";

/**
 * Wraps the runtime for the pipeline: typing while a turn runs, the reply streamed into the chat
 * as an edited preview where the channel allows (delivery/stream.ts), delivery of the final reply
 * (idempotent by runId), the failure line when the turn fails, then the after-turn hooks, whose
 * follow-ups (reply-back loop, completion announces, wake-ups) go back to the pipeline with the
 * outcome, to be committed with the run's final status.
 */

/** Retries of an after-turn hook that failed because storage was unavailable (~8 s in all). */
const HOOK_RETRIES = 4;

interface ChatSide {
  streaming: TurnStreaming;
  stream: ReplyStream | null;
  failureText: string;
}

async function chatSide(services: Services, job: TurnJob, entry: SessionEntry): Promise<ChatSide> {
  const route = routeOf(entry);
  const failureText =
    (route && channelSettings(services.config, route.channel)?.failureText) ?? DEFAULT_FAILURE_TEXT;
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

/**
 * `media.tts.auto` (API.md §8.2): after the text reply went out, the same reply as a voice note
 * ("inbound": only when the turn's user message held one; "always": every reply), under its own
 * outbox key. A speech failure is logged; the text reply already stands.
 */
async function speakReply(
  services: Services,
  job: TurnJob,
  reply: string,
  signal: AbortSignal,
): Promise<void> {
  const media = services.config.media;
  const store = services.media;
  if (!store || media.tts.auto === "off") return;
  if (
    !wantsSpeech(
      media.tts.auto,
      job.messages.flatMap((m) => partsFromMeta(m.meta)),
    )
  )
    return;
  const spoken = await synthesize(
    { media, providers: services.config.models.providers, store },
    reply,
    signal,
  );
  if (!spoken.ok) {
    services.logger.warn(
      { runId: job.runId, sessionKey: job.sessionKey, why: spoken.reason },
      "voice reply not made",
    );
    return;
  }
  const res = await services.delivery.deliver({
    sessionKey: job.sessionKey,
    text: "",
    idempotencyKey: `tts:${job.runId}`,
    attachments: [{ mediaId: spoken.mediaId, name: "reply.ogg", voice: true }],
  });
  if (res.status === "failed" || res.status === "blocked" || res.status === "no-route")
    services.logger.warn(
      { runId: job.runId, sessionKey: job.sessionKey, why: "error" in res ? res.error : res.reason },
      "voice reply not delivered",
    );
}

export function createJobHandlers(
  services: Services,
  runtime: AgentRuntime,
  registry: HandlerRegistry,
): JobHandlers {
  /** The session reads prepareTurn started, by job (dropped with a job that never runs). */
  const prepared = new WeakMap<TurnJob, Promise<SessionEntry | null>>();
  const handlers: JobHandlers = {
    prepareTurn(job) {
      const read = services.store.sessions.get(job.sessionKey);
      read.catch(() => undefined); // a failed read is read again by the turn
      prepared.set(job, read);
      for (const hook of registry.beforeTurn) hook(job);
    },
    async turn(job, ctx) {
      const stopTyping = await startTyping(services, job.runId, job.sessionKey, job.deliver);
      let side: ChatSide | undefined;
      let outcome: TurnOutcome;
      try {
        // one read of the session serves the chat side and the runtime (started by prepareTurn
        // when the pipeline prepared the turn; a session that is not there yet is created here)
        const early = prepared.get(job);
        prepared.delete(job);
        const entry =
          (await early?.catch(() => null)) ??
          (await ensureSession(services, job.sessionKey, { agentId: job.agentId }));
        side = await chatSide(services, job, entry);
        outcome = await runtime.runTurn(job, ctx, side.streaming, entry);
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
          } else await speakReply(services, job, outcome.reply, ctx.signal);
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
      // The hooks plan the follow-ups (reply-back, announces, wake-ups); the pipeline commits them
      // with the final status (one journal record / one Lua script) and submits them after, so a
      // failing queue can no longer lose them. A hook that keeps failing (storage down) is never
      // swallowed: the run does not end "ok" then.
      const failures: string[] = [];
      const followUps: FollowUp[] = [];
      for (const [i, hook] of registry.afterTurn.entries()) {
        try {
          const planned = await retryLoop(() => hook(job, outcome), {
            delayFor: (err, attempt) =>
              isConnectionError(err) && attempt < HOOK_RETRIES
                ? backoffDelayMs(attempt, { baseDelayMs: 200, maxDelayMs: 4000 })
                : undefined,
            signal: ctx.signal,
            onRetry: ({ retry, delayMs, err }) =>
              services.logger.warn(
                { err: errorMessage(err), runId: job.runId, hook: hook.name || i, retry, delayMs },
                "after-turn hook failed; retrying",
              ),
          });
          followUps.push(...planned);
        } catch (err) {
          services.logger.error({ err, runId: job.runId, hook: hook.name || i }, "after-turn hook failed");
          failures.push(`${hook.name || `hook ${i}`}: ${errorMessage(err)}`);
        }
      }
      const result: TurnOutcome = followUps.length > 0 ? { ...outcome, followUps } : outcome;
      if (failures.length > 0 && outcome.status === "ok") {
        return {
          ...result,
          status: "error",
          error: `the turn finished but its follow-up failed (${failures.join("; ")})`,
        };
      }
      return result;
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
  // Telemetry: the turn's span, count and duration; a background job runs linked to the turn that planned it.
  const { turn, background } = handlers;
  handlers.turn = (job, ctx) => observeTurn(job, () => turn(job, ctx));
  handlers.background = (job, ctx) => withinLink(job.data, () => background(job, ctx));
  return handlers;
}
