import path from "node:path";
import type { SpawnMeta } from "../pipeline/turn-meta.js";
import type { Services } from "../services/index.js";
import { isFinal, type SessionEntry } from "../store/types.js";

/**
 * A session's sub-agent children: the request each was started with (kept for a re-run and for
 * `subagents steer`), the workspace each works in, and which of them are still running or have yet
 * to report.
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
