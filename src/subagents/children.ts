import path from "node:path";
import type { SpawnMeta } from "../pipeline/turn-meta.js";
import type { Services } from "../services/index.js";
import { normalizeKey } from "../sessions/keys.js";
import { isFinal, type RunRecord, type SessionEntry } from "../store/types.js";
import type { SpawnResult } from "./types.js";

/**
 * A session's sub-agent children: the request each was started with (kept for a re-run and for
 * `subagents steer`), the workspace each works in, which of them are still running or have yet to
 * report, and (for the `subagents` tool) their runs in index order and the child a target names.
 * Runs come from the session store (`spawnedBy`) joined with run records, so the view survives a
 * restart and works the same on every driver.
 */

export interface SpawnRequestRecord {
  text: string;
  extraSystem: string;
  timeoutMs: number;
  meta: SpawnMeta;
}

/** Child workspace: the target agent's configured `workspace`, else a per-child folder in the state dir. */
export function childWorkspace(services: Services, agentId: string, childSessionId: string): string {
  const ws = services.config.agents.list.find((a) => a.id === agentId)?.workspace;
  return ws ? path.resolve(services.baseDir, ws) : path.join(services.stateDir, "workspaces", childSessionId);
}

/** Children of `requesterKey` (archived included when asked), newest first. */
export async function childrenOf(
  services: Services,
  requesterKey: string,
  includeArchived = false,
): Promise<SessionEntry[]> {
  const all = await services.store.sessions.list({ spawnedBy: requesterKey, includeArchived, limit: 10_000 });
  return all.filter((e) => e.subagent !== undefined).sort((a, b) => b.createdAt - a.createdAt);
}

/**
 * Children of `requesterKey` that may still report to it: their current run's announce has not
 * been handled yet (a child woken to run again counts until that run has reported too).
 */
export async function unreportedChildren(services: Services, requesterKey: string): Promise<SessionEntry[]> {
  return (await childrenOf(services, requesterKey)).filter(awaitsReport);
}

/** This child's current run has not been announced yet (entries from before tracking never wait). */
export function awaitsReport(child: SessionEntry): boolean {
  const s = child.subagent;
  return s?.announcedRunId !== undefined && s.announcedRunId !== s.runId;
}

/** Children whose current run is queued or running. */
export async function activeChildren(services: Services, requesterKey: string): Promise<SessionEntry[]> {
  const out: SessionEntry[] = [];
  for (const e of await childrenOf(services, requesterKey)) {
    const run = e.subagent ? await services.store.runs.get(e.subagent.runId) : null;
    if (run && !isFinal(run)) out.push(e);
  }
  return out;
}

const RECENT_MS = 30 * 60_000;

export interface ChildRun {
  entry: SessionEntry;
  run: RunRecord | null;
  active: boolean;
}

export async function loadChildren(services: Services, requesterKey: string): Promise<ChildRun[]> {
  const out: ChildRun[] = [];
  for (const entry of await childrenOf(services, requesterKey, true)) {
    const run = entry.subagent ? await services.store.runs.get(entry.subagent.runId) : null;
    out.push({ entry, run, active: run !== null && !isFinal(run) });
  }
  return out; // newest spawn first
}

/** active (newest first), then recent (ended within 30 min, newest first): the index order. */
export function indexed(children: ChildRun[], now: number): { active: ChildRun[]; recent: ChildRun[] } {
  const active = children.filter((c) => c.active);
  const recent = children.filter(
    (c) => !c.active && now - (c.run?.endedAt ?? c.entry.subagent?.endedAt ?? 0) <= RECENT_MS,
  );
  return { active, recent };
}

type Resolved = { ok: true; child: ChildRun } | { ok: false; result: SpawnResult };

export function resolveTarget(children: ChildRun[], target: string, now: number, action: string): Resolved {
  const err = (error: string): Resolved => ({
    ok: false,
    result: { status: "error", action, target, error },
  });
  if (children.length === 0) return err("this session has no sub-agents");
  if (target === "last") return { ok: true, child: children[0] as ChildRun };
  // Digits are an index when in range; otherwise they may still be a label or a runId prefix.
  let badIndex: string | undefined;
  if (/^\d+$/.test(target)) {
    const { active, recent } = indexed(children, now);
    const list = [...active, ...recent];
    const c = list[Number(target) - 1];
    if (c) return { ok: true, child: c };
    badIndex = `no sub-agent with index ${target} (1..${list.length}; see subagents list)`;
  }
  if (target.includes(":")) {
    const key = normalizeKey(target);
    const c = children.find((x) => x.entry.key === key);
    return c ? { ok: true, child: c } : err(`${key} is not one of this session's sub-agents`);
  }
  const lower = target.toLowerCase();
  const exact = children.filter((c) => c.entry.label?.toLowerCase() === lower);
  if (exact.length === 1) return { ok: true, child: exact[0] as ChildRun };
  if (exact.length > 1)
    return err(`label "${target}" matches ${exact.length} sub-agents; use an index or key`);
  const prefix = children.filter((c) => c.entry.label?.toLowerCase().startsWith(lower));
  if (prefix.length === 1) return { ok: true, child: prefix[0] as ChildRun };
  if (prefix.length > 1)
    return err(`label prefix "${target}" is ambiguous (${prefix.map((c) => c.entry.label).join(", ")})`);
  const byRun = children.filter((c) => c.entry.subagent?.runId.startsWith(lower));
  if (byRun.length === 1) return { ok: true, child: byRun[0] as ChildRun };
  if (byRun.length > 1) return err(`runId prefix "${target}" is ambiguous; give more characters`);
  return err(
    badIndex ?? `no sub-agent matches "${target}" (use last, an index, a key, a label or a runId prefix)`,
  );
}
