import { spawnedByChain } from "../policy/access.js";
import type { Services } from "../services/index.js";
import { isFinal, type SessionEntry } from "../store/types.js";
import { awaitsReport, type ChildRun, childrenOf, resolveTarget } from "./children.js";
import { submitAnnounce } from "./jobs.js";
import type { SpawnCtx, SpawnResult } from "./types.js";

/**
 * `subagents kill`: abort a child's run and every descendant's, and announce each abort to its
 * requester (the announce job waits for no answer from a killed orchestrator).
 */

const MAX_TREE_DEPTH = 16;

/** Aborts the child's run if unfinished, then every descendant's; returns the keys of killed sessions. */
async function killTree(
  services: Services,
  entry: SessionEntry,
  seen: Set<string>,
  depth = 0,
): Promise<string[]> {
  if (seen.has(entry.key) || depth > MAX_TREE_DEPTH) return [];
  seen.add(entry.key);
  const killed: string[] = [];
  const runId = entry.subagent?.runId;
  const run = runId ? await services.store.runs.get(runId) : null;
  const live = runId !== undefined && run !== null && !isFinal(run);
  const children = await childrenOf(services, entry.key, true);
  // Marked before the cancel, so the announces of its own children (cascade) do not wake it again:
  // also when its run has ended but its announce waits for those children (subagents/announce.ts).
  if (live || children.some(awaitsReport))
    await services.store.sessions.patch(entry.key, { abortedLastRun: true });
  if (live && (await services.pipeline.cancel(runId, "aborted"))) {
    killed.push(entry.key);
    // A queued run ends without a turn (no afterTurn hook): announce its abort here. Same job id
    // as the hook's, so a running one is still announced exactly once.
    if (entry.spawnedBy) {
      const chain = (await spawnedByChain(services, entry)).slice(1);
      await submitAnnounce(services, {
        requesterKey: entry.spawnedBy,
        childKey: entry.key,
        chain,
        childRunId: runId,
        status: "aborted",
      });
    }
  }
  for (const child of children) {
    killed.push(...(await killTree(services, child, seen, depth + 1)));
  }
  return killed;
}

export async function kill(
  args: { target?: string | undefined },
  ctx: Pick<SpawnCtx, "services">,
  children: ChildRun[],
): Promise<SpawnResult> {
  const { services } = ctx;
  const target = args.target ?? "last";
  const seen = new Set<string>();
  if (target === "all" || target === "*") {
    const killed: string[] = [];
    for (const c of children) killed.push(...(await killTree(services, c.entry, seen)));
    return { status: "ok", action: "kill", target: "all", killed: killed.length, sessionKeys: killed };
  }
  const r = resolveTarget(children, target, services.now(), "kill");
  if (!r.ok) return r.result;
  const killed = await killTree(services, r.child.entry, seen);
  const base = {
    action: "kill",
    target,
    runId: r.child.entry.subagent?.runId,
    sessionKey: r.child.entry.key,
  };
  if (killed.length === 0)
    return { status: "done", ...base, killed: 0, message: "the sub-agent had already finished" };
  return { status: "ok", ...base, killed: killed.length, sessionKeys: killed };
}
