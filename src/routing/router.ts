import type { InboundMessage } from "../channels/types.js";
import { channelSettings } from "../config/channels.js";
import type { Config } from "../config/schema.js";
import { errorMessage, isConnectionError, SwitchboardError } from "../errors.js";
import { uuidFrom } from "../ids.js";
import { sendBlocked } from "../policy/access.js";
import { buildSessionKey } from "../sessions/keys.js";
import { resetDue, resetRuleFor, resetSession } from "../sessions/reset.js";
import { FINAL_RUN_STATUSES, type SessionEntry } from "../store/types.js";
import { releaseHolds, usageContext } from "../usage/context.js";
import { resolveAgent } from "./bindings.js";
import { compose } from "./compose.js";
import type { ChannelPolicy, InboundCtx, RoutedCtx, RouterDeps } from "./context.js";
import { ensureRouted } from "./ensure.js";
import { dmAccess } from "./gates/access.js";
import { approvalCommands } from "./gates/approvals.js";
import { chatOf, replyToCommand } from "./gates/command-reply.js";
import { dedupe, inboundDedupeId } from "./gates/dedupe.js";
import { mentionGate } from "./gates/mention.js";
import { ownerCommands } from "./gates/owner-commands.js";
import { pairCommand } from "./gates/pairing.js";
import { sessionCommands } from "./gates/session-commands.js";
import { boundSession } from "./thread-bindings.js";

/**
 * The router: inbound message → agent (bindings) → session key → gates → a turn in the
 * session's lane. Nothing reaches a model before every gate passed. The promise resolves once
 * the message is durably accepted (or deliberately dropped), so adapters may acknowledge it.
 */

const CHAT_CHANNELS: ReadonlySet<string> = new Set(["telegram", "slack", "discord", "whatsapp"]);

export function channelPolicy(config: Config, channel: string): ChannelPolicy {
  const c = channelSettings(config, channel);
  // The chat channels default to pairing (API.md §7); others (web chat, behind the gateway token) are open.
  const chat = CHAT_CHANNELS.has(channel);
  return {
    allowFrom: c?.allowFrom ?? (chat ? [] : ["*"]),
    dmPolicy: c?.dmPolicy ?? (chat ? "pairing" : "open"),
    owners: c?.owners ?? [],
    requireMention: c?.groups?.requireMention ?? true,
    mentionPatterns: c?.groups?.mentionPatterns ?? [],
  };
}

export interface RouteResult {
  accepted: boolean;
  dropped?: string;
  sessionKey?: string;
  runId?: string;
}

/** The agent and session key an inbound message maps to, before thread bindings (pure). */
export function inboundSessionKey(
  config: Config,
  msg: InboundMessage,
): { agentId: string; matchedBy: string; sessionKey: string } {
  const { agentId, matchedBy } = resolveAgent(config, msg);
  // session.dmScope alone decides the DM shape, on every account (SEMANTICS §1).
  const sessionKey = buildSessionKey({
    agentId,
    channel: msg.channel,
    accountId: msg.accountId,
    chatType: msg.chatType,
    peerId: msg.chatType === "direct" ? msg.senderId || msg.peerId : msg.peerId,
    ...(msg.threadId ? { threadId: msg.threadId } : {}),
    ...(msg.topicId ? { topicId: msg.topicId } : {}),
    dmScope: config.session.dmScope,
    identityLinks: config.session.identityLinks,
    scope: config.session.scope,
  });
  return { agentId, matchedBy, sessionKey };
}

/** Agent and session of an inbound message: its bound thread's child session, else the bindings'. */
async function route(ctx: InboundCtx): Promise<RoutedCtx> {
  const { msg, services } = ctx;
  // A bound thread routes to its child session (no mention needed inside it).
  const bound = await boundSession(services, msg);
  if (bound)
    return {
      ...ctx,
      agentId: bound.agentId,
      sessionKey: bound.key,
      entry: bound,
      matchedBy: "thread-binding",
    };
  const { agentId, matchedBy, sessionKey } = inboundSessionKey(services.config, msg);
  // The entry is created only once a message passes the gates (dropped messages leave no session).
  const entry = await services.store.sessions.get(sessionKey);
  return { ...ctx, agentId, sessionKey, entry, matchedBy };
}

/** The session a message that passed the gates goes to: created, or reset when its policy says so. */
async function sessionFor(ctx: RoutedCtx): Promise<SessionEntry> {
  const { msg, services } = ctx;
  const entry = ctx.entry ?? (await ensureRouted(ctx));
  // session.reset policies apply when the next message arrives (never to bound sub-agent threads).
  if (!ctx.entry || ctx.matchedBy === "thread-binding" || entry.spawnedBy !== undefined) return entry;
  const due = resetDue(
    resetRuleFor(services.config, msg.channel, entry.chatType ?? msg.chatType),
    entry,
    services.now(),
  );
  if (!due) return entry;
  return (await resetSession(services, entry.key, due))?.entry ?? entry;
}

/**
 * Records where replies go (`deliveryContext`, `last*`) and that chat's type, which the send
 * policy matches on (`chatType`): a main bucket fed by several chats, or created before any chat,
 * takes the type of the chat it now answers. The updated row, or null when it is gone.
 */
async function rememberReplyTarget(ctx: RoutedCtx): Promise<SessionEntry | null> {
  const { msg, services } = ctx;
  const delivery = chatOf(msg);
  const updated = await services.store.sessions.patch(ctx.sessionKey, {
    chatType: msg.chatType,
    lastChannel: msg.channel,
    lastTo: msg.peerId,
    lastAccountId: msg.accountId,
    lastThreadId: delivery.threadId,
    deliveryContext: delivery,
    updatedAt: services.now(),
    lastInteractionAt: services.now(),
  });
  if (updated) services.bus.emit("session.updated", { entry: updated });
  return updated;
}

/** Past every gate: the session row is brought up to date and the turn submitted to its lane. */
async function accept(ctx: RoutedCtx): Promise<RouteResult> {
  const { msg, services } = ctx;
  // A spent `block` budget refuses the turn before any session change; the chat is told which
  // budget and when it resets (one line per refused message, idempotent on the platform message).
  // An admitted turn holds its first model call's expected cost (API.md §8.4).
  // Derived from the platform message: a redelivery resubmits the same run, which is ignored.
  const runId = uuidFrom(inboundDedupeId(msg));
  // the scope the run's calls will be charged to: the row as this message leaves it (its reply
  // target is this channel unless the session is bound to one)
  const usageCtx = usageContext({
    key: ctx.sessionKey,
    agentId: ctx.agentId,
    ...(ctx.entry?.channel ? { channel: ctx.entry.channel } : {}),
    lastChannel: msg.channel,
  });
  const refused = await services.usage?.admit(usageCtx, {
    runId,
    text: msg.text,
    entry: async () => ctx.entry ?? null,
  });
  if (refused) {
    await replyToCommand(ctx, `Not answered: ${refused.message}.`, "budget").catch((err: unknown) =>
      services.logger.warn({ err, channel: msg.channel }, "budget: refusal not delivered"),
    );
    return { accepted: false, dropped: "budget", sessionKey: ctx.sessionKey };
  }
  // Once the run is submitted its hold is the run's (its turn gives it back: agent/turn-handler.ts);
  // a turn not submitted after all (send policy, a failure) gives it back here, and so does a
  // redelivery past the dedupe (mark lost, lease expired) whose run is already over: the pipeline
  // answers with that run's record, and no turn is left to give back the hold just taken again.
  let handedOver = false;
  try {
    const entry = await sessionFor(ctx);
    const updated = await rememberReplyTarget(ctx);
    const blocked = sendBlocked(services, updated ?? entry);
    if (blocked) return { accepted: false, dropped: "send-policy", sessionKey: ctx.sessionKey };
    const run = await services.pipeline.submitTurn({
      sessionKey: ctx.sessionKey,
      agentId: ctx.agentId,
      text: msg.text,
      provenance: {
        kind: "external_user",
        channel: msg.channel,
        senderId: msg.senderId,
        ...(msg.senderName ? { senderName: msg.senderName } : {}),
      },
      deliver: true,
      origin: "inbound",
      // The message's stored attachments (API.md §8.1): the turn writes them into the user line.
      ...(msg.parts?.length ? { meta: { parts: msg.parts } } : {}),
      runId,
    });
    // (a run still queued or running, this message's first copy, gives it back when its turn ends)
    handedOver = !FINAL_RUN_STATUSES.has(run.status);
    return { accepted: true, sessionKey: ctx.sessionKey, runId: run.runId };
  } finally {
    if (!handedOver) await releaseHolds(services, [runId]);
  }
}

export function createRouter(services: RouterDeps) {
  const pre = compose<InboundCtx>([dedupe]);
  const post = compose<RoutedCtx>([
    approvalCommands,
    ownerCommands,
    pairCommand,
    dmAccess,
    sessionCommands,
    mentionGate,
  ]);

  async function handleInbound(msg: InboundMessage): Promise<RouteResult> {
    const ctx: InboundCtx = { msg, services, policy: channelPolicy(services.config, msg.channel) };
    let result: RouteResult = { accepted: false };
    await pre(ctx, async () => {
      const routed = await route(ctx);
      // Gates inside a bound thread: no mention needed there.
      if (routed.matchedBy === "thread-binding") routed.policy = { ...routed.policy, requireMention: false };
      await post(routed, async () => {
        result = await accept(routed);
      });
      if (!result.accepted && routed.dropped)
        result = { accepted: false, dropped: routed.dropped, sessionKey: routed.sessionKey };
    });
    if (ctx.dropped) result = { accepted: false, dropped: ctx.dropped };
    if (!result.accepted) {
      services.logger.debug(
        { channel: msg.channel, messageId: msg.messageId, dropped: result.dropped },
        "inbound dropped",
      );
    }
    return result;
  }

  return {
    /**
     * Handles one validated inbound message. Resolves when it is durably accepted or deliberately
     * dropped; rejects with UNAVAILABLE while storage/queue are down, so the adapter does not
     * acknowledge it (it retries, or the platform redelivers).
     */
    async handle(msg: InboundMessage): Promise<RouteResult> {
      try {
        return await handleInbound(msg);
      } catch (err) {
        if (isConnectionError(err) && !(err instanceof SwitchboardError)) {
          throw new SwitchboardError("UNAVAILABLE", `could not accept the message: ${errorMessage(err)}`, {
            cause: err,
          });
        }
        throw err;
      }
    },
  };
}

export type Router = ReturnType<typeof createRouter>;
