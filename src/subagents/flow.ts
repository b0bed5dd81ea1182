import { errorMessage } from "../errors.js";
import { type HandlerRegistry, handleJobKind, onEveryTurnEnd, onTurnEnd } from "../pipeline/handlers.js";
import { RetryLaterError, type TurnJob } from "../pipeline/types.js";
import type { Services } from "../services/index.js";
import { KV_YIELDED } from "../store/kv-namespaces.js";
import { traceLinkOf } from "../telemetry/index.js";
import { handleAnnounce } from "./announce.js";
import { handleArchive } from "./cleanup.js";
import { announceKind, archiveKind, wakeKind } from "./jobs.js";
import { handleWake } from "./wake.js";

/**
 * What happens after a sub-agent run (SEMANTICS §3 "Completion announce", cleanup, archive): the
 * after-turn hook that plans it, and the handlers it registers. Step by step:
 *
 * 1. The hook below sees a finished run carrying `meta.spawn` (a sub-agent's run, or an
 *    orchestrator's wake-up: pipeline/turn-meta.ts) and plans the background job
 *    `announce:<childRunId>` (jobs.ts): the pipeline commits it with the run's final status
 *    (transactional outbox) and dedupes by id, so a finished child is always announced, exactly
 *    once, also across a re-run turn or a restart. A turn that yielded plans `wake:<runId>` the
 *    same way.
 * 2. The announce job (announce.ts) builds ONE message from the run record and routes it to the
 *    requester; a requester that waits gets a turn (wake.ts).
 * 3. Cleanup (cleanup.ts): `delete` removes the child after its announce; `keep` schedules
 *    `archive:<childKey>`.
 */
export function installSpawnFlow(services: Services, registry: HandlerRegistry): void {
  /**
   * The session's yield flag, read when the turn was prepared: only a turn of the session sets it
   * (sessions_yield), and this one's turns run one at a time, so what the read found is what the
   * hook would read — except a flag cleared meanwhile (a wake or an announce), cleared again harmlessly.
   */
  const flags = new WeakMap<TurnJob, Promise<{ runId?: string } | null>>();
  registry.beforeTurn.push(function spawnFlagRead(job) {
    const read = services.store.kv.get<{ runId?: string }>(KV_YIELDED, job.sessionKey);
    read.catch(() => undefined); // the hook reads again
    flags.set(job, read);
  });
  onEveryTurnEnd(registry, async function yieldFollowUps(job, outcome) {
    const early = flags.get(job);
    flags.delete(job); // a retried hook reads again
    if (outcome.yielded) {
      const data = { sessionKey: job.sessionKey, runId: job.runId };
      return [wakeKind.followUp(`wake:${job.runId}`, data)];
    }
    // A later turn that did not yield means the session moved on: completions no longer wake it.
    // (Idempotent housekeeping: a re-run after a crash does it again harmlessly.)
    const flag = early
      ? await early
      : await services.store.kv.get<{ runId?: string }>(KV_YIELDED, job.sessionKey);
    if (flag && flag.runId !== job.runId) await services.store.kv.delete(KV_YIELDED, job.sessionKey);
    return [];
  });
  // A sub-agent's run: its announce (which also records the outcome on the child entry).
  onTurnEnd(registry, ["spawn", "announce"], async function spawnAnnounce(job, outcome, { spawn }) {
    if (!spawn) return [];
    const data = { ...spawn, childRunId: job.runId, status: outcome.status };
    return [announceKind.followUp(`announce:${job.runId}`, data)];
  });
  handleJobKind(registry, announceKind, async (data, job, ctx) => {
    try {
      await handleAnnounce(services, data, ctx, traceLinkOf(job.data));
    } catch (err) {
      if (!ctx.signal.aborted && !(err instanceof RetryLaterError))
        services.logger.warn(
          { jobId: job.id, err: errorMessage(err) },
          "sub-agent announce failed; will retry",
        );
      throw err;
    }
  });
  handleJobKind(registry, archiveKind, (data) => handleArchive(services, data));
  handleJobKind(registry, wakeKind, (data, job) => handleWake(services, data, traceLinkOf(job.data)));
}
