import { z } from "zod";
import { defineJobKind } from "../pipeline/handlers.js";
import { spawnMetaSchema } from "../pipeline/turn-meta.js";
import type { BackgroundJob } from "../pipeline/types.js";
import type { Services } from "../services/index.js";

/**
 * The three background job kinds of the sub-agent wing, by id: `announce:<childRunId>`
 * (announce.ts), `archive:<childKey>` (cleanup.ts) and `wake:<runId>` (wake.ts). flow.ts plans
 * them after a turn and registers their handlers.
 */

export const announceDataSchema = spawnMetaSchema.extend({
  childRunId: z.string().min(1),
  /** The outcome as the turn handler saw it; the run record wins once it is final. */
  status: z.enum(["ok", "error", "timeout", "aborted"]).optional(),
});
export type AnnounceData = z.input<typeof announceDataSchema>;

/** `announce:<childRunId>`: the completion announce of a sub-agent run. */
export const announceKind = defineJobKind("announce", announceDataSchema);
/** `archive:<childKey>`: a finished `mode: "run"` child is archived after `archiveAfterMinutes`. */
export const archiveKind = defineJobKind("archive", z.object({ childKey: z.string().min(1) }));
/** `wake:<runId>`: a turn that yielded may have missed the completion it waits for. */
export const wakeKind = defineJobKind(
  "wake",
  z.object({ sessionKey: z.string().min(1), runId: z.string().min(1) }),
);

/** The announce job of a child run; its id is the child run id, so it is one job whoever submits it. */
export function announceJob(data: AnnounceData): BackgroundJob {
  return announceKind.job(`announce:${data.childRunId}`, data);
}

/** Idempotent by child run id: the afterTurn hook plans the same job (`subagents kill` calls this). */
export async function submitAnnounce(services: Services, data: AnnounceData): Promise<void> {
  await services.pipeline.submit(announceJob(data));
}
