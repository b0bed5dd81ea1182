import { randomUUID } from "node:crypto";
import type { Config } from "../config/schema.js";
import type { Services } from "../services/index.js";
import type { ToolCaller } from "../sessions/caller.js";
import type { SessionEntry } from "../store/types.js";
import { mainKey, normalizeKeyInput, parseSessionKey } from "./keys.js";
import { archivedEntry } from "./reset.js";

/** Session lifecycle helpers shared by the router, the RPC methods and the tools. */

export type SessionInit = Partial<Omit<SessionEntry, "key" | "sessionId" | "createdAt" | "updatedAt">> & {
  agentId: string;
};

/** Returns the entry for `key`, creating it (new sessionId) when absent. Emits session.updated on create. */
export async function ensureSession(
  services: Pick<Services, "store" | "bus" | "now">,
  key: string,
  init: SessionInit,
): Promise<SessionEntry> {
  let created = false;
  const entry = await services.store.sessions.update(key, (cur) => {
    if (cur) return null;
    created = true;
    const now = services.now();
    return { ...init, key, sessionId: randomUUID(), createdAt: now, updatedAt: now };
  });
  if (!entry) {
    const existing = await services.store.sessions.get(key);
    if (!existing) throw new Error(`session ${key} vanished during creation`);
    return existing;
  }
  if (created) services.bus.emit("session.updated", { entry });
  return entry;
}

/** Agent id of a key (`agent:<id>:…`), or null for keys outside an agent scope. */
export function agentOfKey(key: string): string | null {
  return parseSessionKey(key).agentId ?? null;
}

export type ResolvedRef = { ok: true; entry: SessionEntry } | { ok: false; error: string; notFound: boolean };

/**
 * An agent's main session always exists for the tools (SEMANTICS §1): a missing main bucket of a
 * configured agent is created on first use; null for any other missing key.
 */
export async function ensureMainSession(
  services: Pick<Services, "store" | "config" | "bus" | "now">,
  key: string,
): Promise<SessionEntry | null> {
  const agentId = mainSessionAgent(services.config, key);
  return agentId === null ? null : ensureSession(services, parseSessionKey(key).key, { agentId });
}

/** The agent whose main session `key` is, when that agent is configured; else null. */
export function mainSessionAgent(config: Config, key: string): string | null {
  const p = parseSessionKey(key);
  if (p.agentId === undefined || p.rest !== "main") return null;
  return config.agents.list.some((a) => a.id === p.agentId) ? p.agentId : null;
}

/**
 * Resolves a tool/RPC `sessionKey` argument: a key, `main`, `current`, or a sessionId
 * (SEMANTICS §1). A missing main bucket of a configured agent is created when `services` can
 * write (bus and clock given); other missing sessions are `notFound`; reserved keys are errors.
 */
export async function resolveSessionRef(
  services: Pick<Services, "store" | "config"> & Partial<Pick<Services, "bus" | "now">>,
  input: string,
  caller: { agentId: string; sessionKey: string },
): Promise<ResolvedRef> {
  const n = normalizeKeyInput(input, caller, { scope: services.config.session.scope });
  if (n.kind === "error") return { ok: false, error: n.error, notFound: false };
  if (n.kind === "sessionId") {
    const e = await services.store.sessions.getBySessionId(n.id);
    if (e) return { ok: true, entry: e };
    // A sessionId a reset replaced: its transcript is archived, still readable.
    const archived = await archivedEntry(services.store, n.id);
    if (archived) return { ok: true, entry: archived };
    // A UUID-looking key could still be a literal key.
    const byKey = await services.store.sessions.get(n.id);
    if (byKey) return { ok: true, entry: byKey };
    return {
      ok: false,
      notFound: true,
      error: `no session with sessionId ${n.id}; use the full key from sessions_list (e.g. agent:<id>:main)`,
    };
  }
  const e = await services.store.sessions.get(n.key);
  if (e) return { ok: true, entry: e };
  const { bus, now } = services;
  if (bus && now) {
    const created = await ensureMainSession({ ...services, bus, now }, n.key);
    if (created) return { ok: true, entry: created };
  }
  return {
    ok: false,
    notFound: true,
    error: `no session with key ${n.key}; sessions_list shows the keys you can use`,
  };
}

/** The tool caller for a session entry (the same derivation for model turns and `tools.invoke`). */
export function callerOf(services: Pick<Services, "config">, entry: SessionEntry): ToolCaller {
  const agentCfg = services.config.agents.list.find((a) => a.id === entry.agentId);
  return {
    sessionKey: entry.key,
    agentId: entry.agentId,
    entry,
    depth: entry.spawnDepth ?? 0,
    sandboxed:
      entry.sandboxed ?? (agentCfg?.sandbox?.mode ?? services.config.agents.defaults.sandbox.mode) === "all",
  };
}

/** The operator acts as the default agent's main session when resolving `main`. */
export function operatorCaller(services: Pick<Services, "config">): { agentId: string; sessionKey: string } {
  const agentId = services.config.agents.list[0]?.id ?? "main";
  return { agentId, sessionKey: mainKey(agentId) };
}
