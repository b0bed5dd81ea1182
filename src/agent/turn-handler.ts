import { channelSettings } from "../config/channels.js";
import { DEFAULT_FAILURE_TEXT } from "../config/schema.js";
import { streamingMode } from "../delivery/index.js";
import { startTyping } from "../delivery/typing.js";
import { partsFromMeta } from "../media/parts.js";
import { synthesize, wantsSpeech } from "../media/speech.js";
import { isSkipToken, type TurnBody } from "../pipeline/handlers.js";
import type { TurnJob, TurnOutcome } from "../pipeline/types.js";
import type { DeliveryOutcome, ReplyStream, Services } from "../services/index.js";
import { routeOf } from "../sessions/route.js";
import { ensureSession } from "../sessions/service.js";
import type { SessionEntry } from "../store/types.js";
import type { AgentRuntime, TurnStreaming } from "./runtime.js";

/**
 * Wraps the runtime for the pipeline: typing while a turn runs, the reply streamed into the chat
 * as an edited preview where the channel allows (delivery/stream.ts), delivery of the final reply
 * (idempotent by runId), the failure line when the turn fails, then the after-turn hooks, whose
 * follow-ups (reply-back loop, completion announces, wake-ups) go back to the pipeline with the
 * outcome, to be committed with the run's final status.
 */

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

/**
 * The agent's turn as the pipeline's handlers run it (pipeline/handlers.ts `createJobHandlers`,
 * which then runs the after-turn hooks of the turn's origin).
 */
export function agentTurn(services: Services, runtime: AgentRuntime): TurnBody {
  /** The session reads prepare started, by job (dropped with a job that never runs). */
  const prepared = new WeakMap<TurnJob, Promise<SessionEntry | null>>();
  return {
    prepare(job) {
      const read = services.store.sessions.get(job.sessionKey);
      read.catch(() => undefined); // a failed read is read again by the turn
      prepared.set(job, read);
    },
    async run(job, ctx) {
      const stopTyping = await startTyping(services, job.runId, job.sessionKey, job.deliver);
      let side: ChatSide | undefined;
      let outcome: TurnOutcome;
      try {
        // one read of the session serves the chat side and the runtime (started by prepare
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
      return outcome;
    },
  };
}
