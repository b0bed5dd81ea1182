import type { z } from "zod";
import type { MediaPart } from "../channels/types.js";
import { userContent } from "../media/parts.js";
import { partOf } from "../media/resolve.js";
import { ANNOUNCE_SKIP } from "../pipeline/handlers.js";
import { type JobContext, RetryLaterError } from "../pipeline/types.js";
import type { Services } from "../services/index.js";
import { KV_ANNOUNCES, KV_SUPPRESSED, KV_UNDELIVERED, KV_YIELDED } from "../store/kv-namespaces.js";
import {
  isFinal,
  type RunRecord,
  type RunStatus,
  type SessionEntry,
  type TranscriptMessage,
  type TranscriptRef,
} from "../store/types.js";
import { formatAnnounce, namedMediaIds, pickResult } from "./announce-text.js";
import { unreportedChildren } from "./children.js";
import { afterAnnounce, citedTranscript } from "./cleanup.js";
import type { announceDataSchema } from "./jobs.js";
import { wakeTurn } from "./wake.js";

/**
 * The `announce:<childRunId>` job (SEMANTICS §3 "Completion announce"): builds ONE message from
 * the run record (status from the runtime outcome, never from model text; the text is
 * announce-text.ts) and routes it: top-level requester → its chat (outbox-idempotent) and its
 * transcript; sub-agent requester → an inter-session turn in its lane; requester gone → its
 * requester, and so on; nobody left → recorded on the child entry and logged. Each step is
 * idempotent on its own (transcript message id, outbox key, turn runId) and the routing decision
 * is stored before acting, so a retried job repeats exactly the same steps.
 */

/** Records that `runId`'s announce is handled (unless the child has started another run since). */
async function markAnnounced(services: Services, childKey: string, runId: string): Promise<void> {
  await services.store.sessions.update(childKey, (cur) =>
    cur?.subagent && cur.subagent.runId === runId && cur.subagent.announcedRunId !== runId
      ? { ...cur, subagent: { ...cur.subagent, announcedRunId: runId } }
      : null,
  );
}

export type FinalStatus = Extract<RunStatus, "ok" | "error" | "timeout" | "aborted">;

/** Upper bound for the run record to become final (the job is normally relayed after it is; a relay by the bullmq sweep can come first). */
const FINAL_WAIT_MS = 60_000;
const TAIL_FOR_RESULT = 200;
/**
 * When a held announce looks again whether its sub-agent's own children have all reported: after
 * a tenth of the time it has waited so far, between 0.5 and 10 s (a child that runs for hours is
 * not polled twice a second; one that ends soon is noticed soon).
 */
function heldAnnounceRetryMs(run: RunRecord | null, now: number): number {
  const waited = run?.endedAt !== undefined ? now - run.endedAt : 0;
  return Math.min(10_000, Math.max(500, Math.round(waited / 10)));
}

interface RouteState {
  /** Session that receives it; null = nobody left. */
  target: string | null;
  /** "top" delivers to a chat; "orchestrator" gets an inter-session turn. */
  kind: "top" | "orchestrator" | "none";
  /** Top-level requester that yielded: also start a turn so it continues. */
  wake: boolean;
}

async function waitFinal(services: Services, runId: string, signal: AbortSignal): Promise<RunRecord | null> {
  if (signal.aborted) throw signal.reason;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason ?? new Error("aborted"));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([services.pipeline.wait(runId, FINAL_WAIT_MS), aborted]);
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}

async function runMessages(
  services: Services,
  child: SessionEntry,
  runId: string,
): Promise<TranscriptMessage[]> {
  const ref = { agentId: child.agentId, sessionId: child.sessionId };
  const tail = await services.store.transcripts.readTail(ref, { limit: TAIL_FOR_RESULT, includeTools: true });
  return tail.filter((m) => m.runId === runId);
}

/** Appends `msg` to the session's transcript unless a message with its id is already there. */
async function appendOnce(services: Services, entry: SessionEntry, msg: TranscriptMessage): Promise<void> {
  const ref: TranscriptRef = { agentId: entry.agentId, sessionId: entry.sessionId };
  if (!(await services.store.transcripts.append(ref, msg))) return; // the store skips a known id
  services.bus.emit("message.appended", { sessionKey: entry.key, message: msg });
}

async function decideRoute(services: Services, d: z.output<typeof announceDataSchema>): Promise<RouteState> {
  const saved = await services.store.kv.get<RouteState>(KV_ANNOUNCES, d.childRunId);
  if (saved) return saved;
  let state: RouteState = { target: null, kind: "none", wake: false };
  for (const key of [d.requesterKey, ...d.chain]) {
    const e = await services.store.sessions.get(key);
    if (!e || e.archivedAt !== undefined) continue;
    const orchestrator = (e.spawnDepth ?? 0) >= 1;
    const wake = orchestrator
      ? e.abortedLastRun !== true
      : (await services.store.kv.get(KV_YIELDED, e.key)) !== null;
    state = { target: e.key, kind: orchestrator ? "orchestrator" : "top", wake };
    break;
  }
  await services.store.kv.set(KV_ANNOUNCES, d.childRunId, state);
  if (state.kind === "top" && state.wake && state.target)
    await services.store.kv.delete(KV_YIELDED, state.target);
  return state;
}

async function deliverOrThrow(
  services: Services,
  sessionKey: string,
  text: string,
  idempotencyKey: string,
  files: readonly MediaPart[],
  traceparent: string | undefined,
): Promise<void> {
  const attachments = files.flatMap((p) => ("mediaId" in p && p.mediaId ? [{ mediaId: p.mediaId }] : []));
  const res = await services.delivery.deliver({
    sessionKey,
    text,
    idempotencyKey,
    ...(attachments.length ? { attachments } : {}),
    traceparent,
  });
  if (res.status === "failed") throw new Error(`announce delivery to ${sessionKey} failed: ${res.error}`);
  if (res.status === "blocked" || res.status === "no-route") {
    // Not retried: the announce is in the requester's transcript, so the agent still has it.
    services.logger.info({ sessionKey, why: res.reason }, "sub-agent announce not posted to a chat");
  }
}

async function recordUndelivered(
  services: Services,
  d: z.output<typeof announceDataSchema>,
  text: string,
): Promise<void> {
  const updated = await services.store.sessions.update(d.childKey, (cur) =>
    cur?.subagent ? { ...cur, subagent: { ...cur.subagent, undeliveredAnnounce: text } } : null,
  );
  if (!updated) await services.store.kv.set(KV_UNDELIVERED, d.childRunId, { childKey: d.childKey, text });
  services.logger.warn(
    {
      childKey: d.childKey,
      runId: d.childRunId,
      requesterKey: d.requesterKey,
      recordedOn: updated ? "child entry" : "kv",
    },
    "sub-agent announce has no requester left; recorded instead of delivered",
  );
}

/**
 * The stored files the child's result names by `mediaId` (API.md §8.2): only ids its own
 * transcript held ({@link namedMediaIds}) and the media store still has.
 */
async function announcedFiles(
  services: Services,
  child: SessionEntry,
  resultText: string,
): Promise<MediaPart[]> {
  if (!services.media || !resultText.includes("sha256:")) return [];
  const ref = { agentId: child.agentId, sessionId: child.sessionId };
  const transcript = await services.store.transcripts.readTail(ref, {
    limit: TAIL_FOR_RESULT,
    includeTools: true,
  });
  const parts: MediaPart[] = [];
  for (const id of namedMediaIds(resultText, transcript)) {
    const stored = await services.media.stat(id);
    if (stored) parts.push(partOf(stored));
  }
  return parts;
}

/**
 * `span`: the child's turn that planned the announce (telemetry/trace.ts `traceLinkOf`): the
 * report's delivery is in its trace, a wake-up turn links to it.
 */
export async function handleAnnounce(
  services: Services,
  d: z.output<typeof announceDataSchema>,
  ctx: JobContext,
  span?: string,
): Promise<void> {
  if ((await services.store.kv.get(KV_SUPPRESSED, d.childRunId)) !== null) return;

  const run = await waitFinal(services, d.childRunId, ctx.signal);
  const status: FinalStatus = run && isFinal(run) ? (run.status as FinalStatus) : (d.status ?? "error");
  let child = await services.store.sessions.get(d.childKey);
  if (child?.subagent?.runId === d.childRunId && child.subagent.outcome !== status) {
    child = await services.store.sessions.update(d.childKey, (cur) =>
      cur?.subagent
        ? { ...cur, subagent: { ...cur.subagent, outcome: status, endedAt: run?.endedAt ?? services.now() } }
        : null,
    );
  }
  // An orchestrator woken by its own children's reports ran again: that later run is announced
  // instead, so the requester gets one report for the task (SEMANTICS §3), not one per run.
  if (child?.subagent && child.subagent.runId !== d.childRunId) return;
  // An orchestrator whose children have not all reported yet (it yielded, or answered before
  // they finished) holds its announce: a child's report wakes it and that run is announced
  // instead; if none does (ANNOUNCE_SKIP, a kill), this one goes once the last has reported.
  if (child && (await unreportedChildren(services, child.key)).length > 0)
    throw new RetryLaterError(
      `sub-agent ${child.key} waits for its own sub-agents`,
      heldAnnounceRetryMs(run, services.now()),
    );
  const messages = child ? await runMessages(services, child, d.childRunId) : [];
  const finalReply = status === "ok" ? (run?.reply ?? "") : "";
  if (status === "ok" && finalReply.trim() === ANNOUNCE_SKIP) {
    await markAnnounced(services, d.childKey, d.childRunId);
    await afterAnnounce(services, child, true, run);
    return;
  }
  const result = pickResult(status === "ok" ? finalReply : "", messages);
  const text = formatAnnounce({
    status,
    result,
    label: child?.label ?? child?.subagent?.task ?? d.childKey,
    ...(run?.error ? { error: run.error } : {}),
    ...(run ? { run } : {}),
    childKey: d.childKey,
    ...(child ? { sessionId: child.sessionId, transcriptPath: citedTranscript(services, child, run) } : {}),
  });

  const files = child && result.source !== "none" ? await announcedFiles(services, child, result.text) : [];

  if (!(await ctx.stillOwner())) return;
  const route = await decideRoute(services, d);
  const target = route.target ? await services.store.sessions.get(route.target) : null;
  const idem = `spawn-announce:${d.childRunId}`;
  if (!target || route.kind === "none") {
    await recordUndelivered(services, d, text);
    await markAnnounced(services, d.childKey, d.childRunId);
    await services.store.kv.delete(KV_ANNOUNCES, d.childRunId);
    return;
  }
  const announceMsg: TranscriptMessage = {
    id: `announce:${d.childRunId}`,
    sessionId: target.sessionId,
    role: "user",
    content: userContent(text, files),
    timestamp: services.now(),
    provenance: { kind: "subagent_announce", sourceSessionKey: d.childKey, sourceRunId: d.childRunId },
  };
  if (route.kind === "orchestrator") {
    // A killed (or timed-out) orchestrator is not revived by its children's reports: they are kept
    // in its transcript instead.
    if (route.wake) await wakeTurn(services, target, text, d, "orchestrator", files, span);
    else await appendOnce(services, target, announceMsg);
  } else {
    if (route.wake) await wakeTurn(services, target, text, d, "top", files, span);
    else await appendOnce(services, target, announceMsg);
    // A thread-bound child posts its output into its own thread instead of the requester's chat.
    if (child?.threadBinding) {
      await deliverOrThrow(
        services,
        child.key,
        status === "ok" && result.text ? result.text : text,
        idem,
        files,
        span,
      );
    } else {
      await deliverOrThrow(services, target.key, text, idem, files, span);
    }
  }
  await markAnnounced(services, d.childKey, d.childRunId);
  await afterAnnounce(services, child, true, run);
  await services.store.kv.delete(KV_ANNOUNCES, d.childRunId);
}
