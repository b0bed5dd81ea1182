import { rm } from "node:fs/promises";
import path from "node:path";
import { RetryLaterError } from "../pipeline/types.js";
import type { Services } from "../services/index.js";
import { KV_SPAWN_REQUESTS } from "../store/kv-namespaces.js";
import { isFinal, type RunRecord, type SessionEntry } from "../store/types.js";
import { archiveKind } from "./jobs.js";
import { subagentSettings } from "./limits.js";

/**
 * What becomes of a child once it has reported: `cleanup: "delete"` removes it (transcript renamed,
 * entry, request and per-child workspace gone); `keep` archives a `mode: "run"` child after the
 * agent's `archiveAfterMinutes` (the `archive:<childKey>` job). Also the transcript path an
 * announce cites, which depends on that fate.
 */

/**
 * When a `cleanup: "delete"` child's transcript is renamed: its end, so the announce (built before)
 * and the rename (after it) agree on the final path, also when a retried job builds it again.
 */
function deleteStamp(child: SessionEntry, run: RunRecord | null, now: number): number {
  return run?.endedAt ?? child.subagent?.endedAt ?? child.createdAt ?? now;
}

async function removeChild(services: Services, child: SessionEntry, at: number): Promise<void> {
  await services.store.transcripts.archive(
    { agentId: child.agentId, sessionId: child.sessionId },
    "deleted",
    { at },
  );
  await services.store.sessions.delete(child.key);
  await services.store.kv.delete(KV_SPAWN_REQUESTS, child.key);
  // The per-child workspace (attachments) exists only for this child; a configured workspace is shared.
  if (!services.config.agents.list.find((a) => a.id === child.agentId)?.workspace) {
    await rm(path.join(services.stateDir, "workspaces", child.sessionId), { recursive: true, force: true });
  }
}

export async function afterAnnounce(
  services: Services,
  child: SessionEntry | null,
  delivered: boolean,
  run: RunRecord | null,
): Promise<void> {
  if (!child?.subagent || !delivered) return; // an unreached announce stays recorded on the child
  if (child.subagent.cleanup === "delete") {
    await removeChild(services, child, deleteStamp(child, run, services.now()));
    return;
  }
  if (child.subagent.mode !== "run") return; // thread-bound sessions stay for follow-ups
  // 0 = never archive (like runTimeoutSeconds 0 = no timeout).
  const minutes = subagentSettings(services.config, child.agentId).archiveAfterMinutes;
  if (minutes <= 0) return;
  await services.pipeline.submit(archiveKind.job(`archive:${child.key}`, { childKey: child.key }), {
    delayMs: Math.round(minutes * 60_000),
  });
}

/** The transcript path an announce cites: the final one (a deleted child's is renamed right after). */
export function citedTranscript(services: Services, child: SessionEntry, run: RunRecord | null): string {
  const ref = { agentId: child.agentId, sessionId: child.sessionId };
  return child.subagent?.cleanup === "delete"
    ? services.store.transcripts.archivedLocation(ref, "deleted", deleteStamp(child, run, services.now()))
    : services.store.transcripts.locate(ref);
}

const ARCHIVE_RETRY_MS = 60_000;

export async function handleArchive(services: Services, data: { childKey: string }): Promise<void> {
  const entry = await services.store.sessions.get(data.childKey);
  if (!entry || entry.archivedAt !== undefined) return;
  const run = entry.subagent ? await services.store.runs.get(entry.subagent.runId) : null;
  if (run && !isFinal(run))
    throw new RetryLaterError(`sub-agent ${entry.key} is running again; archive later`, ARCHIVE_RETRY_MS);
  const renamed = await services.store.transcripts.archive(
    { agentId: entry.agentId, sessionId: entry.sessionId },
    "archived",
  );
  const updated = await services.store.sessions.patch(entry.key, { archivedAt: services.now() });
  await services.store.kv.delete(KV_SPAWN_REQUESTS, entry.key);
  if (updated) services.bus.emit("session.updated", { entry: updated });
  services.logger.debug({ sessionKey: entry.key, transcript: renamed }, "sub-agent archived");
}
