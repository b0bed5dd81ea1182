import { randomUUID } from "node:crypto";
import type { Config } from "../config/schema.js";
import type { Services } from "../services/index.js";
import { KV_SESSION_ARCHIVE } from "../store/kv-namespaces.js";
import type { ChatType, SessionEntry, StoreDriver } from "../store/types.js";

/**
 * Session resets: `/new`, `/reset`, the RPC `sessions.reset` and the `session.reset` policies
 * (daily at `atHour`, or after `idleMinutes` without an inbound message) start a new `sessionId`
 * under the same key. The old transcript stays where it is, under its own sessionId, and an
 * archive record (kv `sessionArchive`, by old sessionId) keeps it reachable: `sessions_history`
 * with that sessionId reads it. Nothing is destroyed.
 */

export type ResetReason = "command" | "rpc" | "daily" | "idle";

export interface ArchivedSession {
  key: string;
  agentId: string;
  sessionId: string;
  startedAt: number;
  endedAt: number;
  reason: ResetReason;
  /** The sessionId that replaced it. */
  nextSessionId: string;
}

export interface ResetResult {
  entry: SessionEntry;
  previousSessionId: string;
}

/** Starts a new sessionId for `key`; null when there is no such session. */
export async function resetSession(
  services: Pick<Services, "store" | "bus" | "now" | "logger">,
  key: string,
  reason: ResetReason,
): Promise<ResetResult | null> {
  let previous: SessionEntry | null = null;
  const now = services.now();
  const entry = await services.store.sessions.update(key, (cur) => {
    if (!cur) return null;
    previous = cur;
    const next: SessionEntry = {
      ...cur,
      sessionId: randomUUID(),
      sessionStartedAt: now,
      updatedAt: now,
      previousSessionId: cur.sessionId,
    };
    // Facts of the old conversation do not carry over.
    delete next.compactionCount;
    delete next.contextTokens;
    delete next.totalTokens;
    delete next.abortedLastRun;
    delete next.systemSent;
    return next;
  });
  const old = previous as SessionEntry | null;
  if (!entry || !old) return null;
  const record: ArchivedSession = {
    key,
    agentId: old.agentId,
    sessionId: old.sessionId,
    startedAt: old.sessionStartedAt ?? old.createdAt,
    endedAt: now,
    reason,
    nextSessionId: entry.sessionId,
  };
  await services.store.kv.set(KV_SESSION_ARCHIVE, old.sessionId, record);
  services.bus.emit("session.updated", { entry });
  services.logger.info(
    { sessionKey: key, previousSessionId: old.sessionId, sessionId: entry.sessionId, reason },
    "session reset",
  );
  return { entry, previousSessionId: old.sessionId };
}

/**
 * The entry as it was for an archived sessionId (same key and agent, the old sessionId), so the
 * history view reads the old transcript; null when `sessionId` was never archived by a reset.
 */
export async function archivedEntry(store: StoreDriver, sessionId: string): Promise<SessionEntry | null> {
  const rec = await store.kv.get<ArchivedSession>(KV_SESSION_ARCHIVE, sessionId);
  if (!rec) return null;
  const current = await store.sessions.get(rec.key);
  const base: SessionEntry = current ?? {
    key: rec.key,
    agentId: rec.agentId,
    sessionId: rec.sessionId,
    createdAt: rec.startedAt,
    updatedAt: rec.endedAt,
  };
  return {
    ...base,
    agentId: rec.agentId,
    sessionId: rec.sessionId,
    sessionStartedAt: rec.startedAt,
    updatedAt: rec.endedAt,
    archivedAt: rec.endedAt,
  };
}

export interface ResetRule {
  mode: "off" | "daily" | "idle";
  atHour: number;
  idleMinutes: number;
}

/** `session.reset`, then `byChatType.<direct|group>`, then `byChannel.<channel>` (unset fields inherit). */
export function resetRuleFor(
  config: Config,
  channel: string | undefined,
  chatType: ChatType | undefined,
): ResetRule {
  const r = config.session.reset;
  let rule: ResetRule = { mode: r.mode, atHour: r.atHour, idleMinutes: r.idleMinutes };
  const merge = (o: Partial<ResetRule> | undefined) => {
    if (!o) return;
    rule = {
      mode: o.mode ?? rule.mode,
      atHour: o.atHour ?? rule.atHour,
      idleMinutes: o.idleMinutes ?? rule.idleMinutes,
    };
  };
  if (chatType) merge(chatType === "direct" ? r.byChatType.direct : r.byChatType.group);
  if (channel) merge(r.byChannel[channel]);
  return rule;
}

/** The most recent `atHour`:00 (gateway host time) at or before `now`. */
export function lastDailyBoundary(now: number, atHour: number): number {
  const d = new Date(now);
  d.setHours(atHour, 0, 0, 0);
  if (d.getTime() > now) d.setDate(d.getDate() - 1);
  return d.getTime();
}

function startedAt(entry: SessionEntry): number {
  return entry.sessionStartedAt ?? entry.createdAt;
}

function lastInteraction(entry: SessionEntry): number {
  return entry.lastInteractionAt ?? entry.sessionStartedAt ?? entry.createdAt;
}

/** Whether the next inbound message starts a new session under `rule`. */
export function resetDue(rule: ResetRule, entry: SessionEntry, now: number): "daily" | "idle" | null {
  if (rule.mode === "daily") return startedAt(entry) < lastDailyBoundary(now, rule.atHour) ? "daily" : null;
  if (rule.mode === "idle") return now - lastInteraction(entry) > rule.idleMinutes * 60_000 ? "idle" : null;
  return null;
}

/**
 * When the session will reset (applied at the first message after this instant); undefined when
 * no policy applies. A reset already due answers `now`.
 */
export function nextResetAt(rule: ResetRule, entry: SessionEntry, now: number): number | undefined {
  if (rule.mode === "off") return undefined;
  if (resetDue(rule, entry, now)) return now;
  if (rule.mode === "idle") return lastInteraction(entry) + rule.idleMinutes * 60_000;
  const d = new Date(lastDailyBoundary(now, rule.atHour));
  d.setDate(d.getDate() + 1);
  return d.getTime();
}
