import { randomUUID } from "node:crypto";
import { SwitchboardError } from "../errors.js";
import { resolveAttachments } from "../media/resolve.js";
import { sendBlocked } from "../policy/access.js";
import type { Services } from "../services/index.js";
import { isReservedKey, normalizeKeyInput, parseSessionKey } from "../sessions/keys.js";
import { ensureSession, operatorCaller } from "../sessions/service.js";
import type { Provenance, RunRecord, SessionEntry } from "../store/types.js";
import { MAX_TIMEOUT_SECONDS } from "../tools/sessions-send.js";
import { releaseHolds, usageContext } from "../usage/context.js";

/** The key checks (config), the session (store, created with bus and clock), the turn (pipeline). */
export type ChatSendDeps = Pick<Services, "config" | "store" | "bus" | "now" | "pipeline" | "logger"> &
  Partial<Pick<Services, "media" | "usage">>;

/**
 * How a `chat.send` message is marked as the operator's: a person's message (API.md §6 kinds) with
 * the operator as sender and no platform channel (a platform's inbound message always names one).
 */
export const OPERATOR_PROVENANCE: Provenance = Object.freeze({ kind: "external_user", senderId: "operator" });

/** Whether a transcript line's provenance is the operator's (`chat.send`). */
export function isOperatorProvenance(p: Provenance | undefined): boolean {
  return (
    p?.kind === "external_user" && p.channel === undefined && p.senderId === OPERATOR_PROVENANCE.senderId
  );
}

/** `chat.send`: the operator writes into a session (created when the key is new). */
export async function chatSend(
  services: ChatSendDeps,
  p: {
    sessionKey: string;
    message: string;
    timeoutSeconds?: number | undefined;
    deliver?: boolean | undefined;
    attachments?: Array<{ mediaId: string }> | undefined;
  },
): Promise<Record<string, unknown>> {
  const parts = await resolveAttachments(services.media, p.attachments ?? [], "attachments");
  const caller = operatorCaller(services);
  const n = normalizeKeyInput(p.sessionKey, caller, { scope: services.config.session.scope });
  if (n.kind === "error")
    throw new SwitchboardError("INVALID_PARAMS", `sessionKey: ${n.error}`, {
      details: { field: "sessionKey" },
    });
  let key: string;
  // the row a sessionId names, read once: the admission and the turn use it below
  let byId: SessionEntry | undefined;
  if (n.kind === "sessionId") {
    const e = await services.store.sessions.getBySessionId(n.id);
    if (!e)
      throw new SwitchboardError("NOT_FOUND", `no session with sessionId ${n.id}; use the full key`, {
        details: { field: "sessionKey" },
      });
    byId = e;
    key = e.key;
  } else key = n.key;
  if (/\s/.test(key) || isReservedKey(key)) {
    throw new SwitchboardError("INVALID_PARAMS", `sessionKey: "${p.sessionKey}" is not a valid session key`, {
      details: { field: "sessionKey" },
    });
  }
  const agentId = parseSessionKey(key).agentId ?? caller.agentId;
  if (!services.config.agents.list.some((a) => a.id === agentId)) {
    throw new SwitchboardError(
      "INVALID_PARAMS",
      `sessionKey: agent "${agentId}" is not configured (agents.list)`,
      {
        details: { field: "sessionKey" },
      },
    );
  }
  // A spent budget refuses the turn here, as an RPC error, never as an accepted run that fails;
  // an admitted one holds its first model call's expected cost (API.md §8.4).
  // The scope is the one the run's calls will be charged to (its row's channel); one read of the
  // session serves the admission and the turn.
  const runId = randomUUID();
  const existing = byId ?? (await services.store.sessions.get(key));
  const usageCtx = usageContext(existing ?? { key, agentId });
  const refused = await services.usage?.admit(usageCtx, {
    runId,
    text: p.message,
    entry: async () => existing,
  });
  if (refused) throw refused;
  // Once the run is submitted its hold is the run's (its turn gives it back: agent/turn-handler.ts);
  // a turn not submitted after all (send policy, a failure) gives it back here. (A hold whose run
  // never came, the process having died, lapses: src/usage/admission.ts.)
  let submitted = false;
  let entry: SessionEntry;
  let run: RunRecord;
  try {
    entry = existing ?? (await ensureSession(services, key, { agentId }));
    const blocked = sendBlocked(services, entry);
    if (blocked) return { status: "error", error: blocked, sessionKey: entry.key };
    run = await services.pipeline.submitTurn({
      sessionKey: entry.key,
      agentId,
      text: p.message,
      provenance: { ...OPERATOR_PROVENANCE },
      deliver: p.deliver ?? false,
      origin: "operator",
      // the run the hold is for (with no budget none is held, and a given runId costs a read of the record)
      ...(services.config.usage.budgets.length > 0 ? { runId } : {}),
      ...(parts.length ? { meta: { parts } } : {}),
    });
    submitted = true;
  } finally {
    if (!submitted) await releaseHolds(services, [runId]);
  }
  const timeoutSeconds = p.timeoutSeconds ?? 30;
  if (timeoutSeconds === 0) return { runId: run.runId, status: "accepted", sessionKey: entry.key };
  const rec = await services.pipeline.wait(run.runId, Math.min(timeoutSeconds, MAX_TIMEOUT_SECONDS) * 1000);
  if (!rec || rec.status === "queued" || rec.status === "running" || rec.status === "waiting") {
    return {
      runId: run.runId,
      status: "timeout",
      error: `no reply within ${timeoutSeconds}s; the run goes on (agent.wait ${run.runId})`,
      sessionKey: entry.key,
    };
  }
  if (rec.status === "ok")
    return { runId: run.runId, status: "ok", reply: rec.reply ?? "", sessionKey: entry.key };
  return {
    runId: run.runId,
    status: rec.status === "timeout" ? "timeout" : "error",
    error: rec.error ?? rec.status,
    sessionKey: entry.key,
  };
}
