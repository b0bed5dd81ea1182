import { channelSettings } from "../config/channels.js";
import { DEFAULT_FAILURE_TEXT } from "../config/schema.js";
import { partsFromMeta } from "../media/parts.js";
import { synthesize, wantsSpeech } from "../media/speech.js";
import { isSkipToken } from "../pipeline/handlers.js";
import type { JobContext, TurnJob, TurnOutcome } from "../pipeline/types.js";
import type { DeliveryOutcome, ReplyStream, Services, TurnStreaming } from "../services/index.js";
import { routeOf } from "../sessions/route.js";
import type { SessionEntry } from "../store/types.js";
import { turnSpan } from "../telemetry/index.js";
import { streamingMode } from "./index.js";
import { startTyping, type TypingDeps } from "./typing.js";

/**
 * The chat side of one turn: typing while it runs, the reply streamed into the chat as an edited
 * preview where the channel allows (stream.ts), then the final reply (idempotent by runId) and its
 * voice note, or the failure line when the turn failed. All of it works from the session row the
 * turn read when it began (its route, send policy and chat type): the turn reads its session once.
 */

/** Typing's deps (typing.ts), the delivery that posts, the media store a voice reply is kept in. */
export type TurnChatDeps = TypingDeps & Pick<Services, "delivery" | "media">;

export interface TurnChat {
  /** How the runtime streams the turn: into the preview when there is one. */
  streaming: TurnStreaming;
  /** Ends the typing indicator (again: a no-op). */
  stopTyping(): Promise<void>;
  /** The preview, when the reply streams into one. */
  stream: ReplyStream | null;
  failureText: string;
  entry: SessionEntry;
}

/** Typing and the streamed preview of a turn about to run, for the session row `entry`. */
export async function openTurnChat(
  services: TurnChatDeps,
  job: TurnJob,
  entry: SessionEntry,
): Promise<TurnChat> {
  const stopTyping = await startTyping(services, job.runId, job.sessionKey, job.deliver, entry);
  try {
    const route = routeOf(entry);
    const failureText =
      (route && channelSettings(services.config, route.channel)?.failureText) ?? DEFAULT_FAILURE_TEXT;
    const mode = route ? streamingMode(services.config, route.channel) : "partial";
    if (mode === "off")
      return { streaming: { enabled: false }, stream: null, failureText, stopTyping, entry };
    const stream =
      job.deliver && mode === "partial" && services.delivery.openStream
        ? await services.delivery.openStream(
            { sessionKey: job.sessionKey, idempotencyKey: `reply:${job.runId}`, traceparent: turnSpan(job) },
            entry,
          )
        : null;
    return {
      streaming: stream ? { onDelta: (d) => stream.push(d), onReset: () => stream.reset() } : {},
      stream,
      failureText,
      stopTyping,
      entry,
    };
  } catch (err) {
    await stopTyping();
    throw err;
  }
}

/**
 * What the chat hears when the turn is over: the reply (or nothing when it is a skip token, or
 * when this worker no longer owns the turn), else — for a failed turn — one plain line; the cause
 * is in the run record and the log. A reply that cannot be delivered is kept on the outcome
 * (`deliveryError`), never lost silently.
 */
export async function deliverOutcome(
  services: TurnChatDeps,
  job: TurnJob,
  chat: TurnChat,
  outcome: TurnOutcome,
  ctx: JobContext,
): Promise<void> {
  const { stream, entry } = chat;
  if (job.deliver && outcome.status === "ok" && outcome.reply && !isSkipToken(outcome.reply)) {
    if (!(await ctx.stillOwner())) {
      await stream?.close();
      return;
    }
    const res: DeliveryOutcome = stream
      ? await stream.finish(outcome.reply)
      : await services.delivery.deliver(
          {
            sessionKey: job.sessionKey,
            text: outcome.reply,
            idempotencyKey: `reply:${job.runId}`,
            traceparent: turnSpan(job),
          },
          entry,
        );
    if (res.status === "failed" || res.status === "blocked" || res.status === "no-route") {
      const why = "error" in res ? res.error : res.reason;
      services.logger.warn({ runId: job.runId, sessionKey: job.sessionKey, why }, "reply not delivered");
      outcome.deliveryError = why;
    } else await speakReply(services, job, entry, outcome.reply, ctx.signal);
    return;
  }
  await stream?.close();
  if (
    job.deliver &&
    (outcome.status === "error" || outcome.status === "timeout") &&
    (await ctx.stillOwner())
  ) {
    services.logger.warn(
      { runId: job.runId, sessionKey: job.sessionKey, status: outcome.status, error: outcome.error },
      "turn failed; telling the chat",
    );
    const res = await services.delivery.deliver(
      {
        sessionKey: job.sessionKey,
        text: chat.failureText,
        idempotencyKey: `failure:${job.runId}`,
        kind: "failure",
        traceparent: turnSpan(job),
      },
      entry,
    );
    if (res.status === "failed")
      services.logger.warn({ runId: job.runId, why: res.error }, "failure line not delivered");
  }
}

/**
 * `media.tts.auto` (API.md §8.2): after the text reply went out, the same reply as a voice note
 * ("inbound": only when the turn's user message held one; "always": every reply), under its own
 * outbox key. A speech failure is logged; the text reply already stands.
 */
async function speakReply(
  services: TurnChatDeps,
  job: TurnJob,
  entry: SessionEntry,
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
  const res = await services.delivery.deliver(
    {
      sessionKey: job.sessionKey,
      text: "",
      idempotencyKey: `tts:${job.runId}`,
      attachments: [{ mediaId: spoken.mediaId, name: "reply.ogg", voice: true }],
      traceparent: turnSpan(job),
    },
    entry,
  );
  if (res.status === "failed" || res.status === "blocked" || res.status === "no-route")
    services.logger.warn(
      { runId: job.runId, sessionKey: job.sessionKey, why: "error" in res ? res.error : res.reason },
      "voice reply not delivered",
    );
}
