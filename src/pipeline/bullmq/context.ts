import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "../../log.js";
import type { ScriptRunner } from "../../redis/scripts.js";
import type { RunRecord, RunStore } from "../../store/types.js";
import type { FollowUp, JobHandlers, RunEvent } from "../types.js";
import type { PipelineKeys } from "./keys.js";
import type { BullmqTuning } from "./schema.js";

/** What the driver's parts (turns, background jobs, sweeper) share. Built once by `index.ts`. */
/**
 * The live event relay's side of a turn (src/app/live-relay.ts). takeTurn-4 counts the gateways
 * whose /ws clients may watch; when none can, the turn's live events are not published at all.
 */
export interface LiveAudience {
  /** This process's member of the audience zset (`keys.liveAudience`). */
  readonly member: string;
  /** Stops relaying the session's live events until the returned function is called. */
  quiet(sessionKey: string): () => void;
}

export interface DriverContext {
  readonly keys: PipelineKeys;
  /** The shared, non-blocking connection (owned by the composition root). */
  readonly redis: Redis;
  /** Runs the pipeline's Lua scripts (`src/redis/commands/pipeline.ts`) on `redis`. */
  readonly scripts: ScriptRunner;
  readonly queue: Queue;
  readonly runs: RunStore;
  readonly logger: Logger;
  readonly now: () => number;
  readonly tuning: BullmqTuning;
  /** This pipeline instance; bus messages carry it so a process ignores its own broadcasts. */
  readonly instanceId: string;
  /** The live relay, or null without one (tests): turns then never ask for their audience. */
  readonly live: LiveAudience | null;
  handlers(): JobHandlers | null;
  /** Tells this process's listeners (onRunEvent). */
  emit(event: RunEvent): void;
  /** Resolves this process's waiters on a final record. */
  settle(run: RunRecord): void;
  /** true once stop() began: jobs fetched now are handed back untouched. */
  stopping(): boolean;
  /** Submits one follow-up through this pipeline (idempotent by its id); rejects once stopping. */
  submitFollowUp(f: FollowUp): Promise<void>;
}

export function eventMessage(instanceId: string, type: RunEvent["type"], runs: RunRecord[]): string {
  return `${eventPrefix(instanceId)}${JSON.stringify({ type, runs }).slice(1)}`;
}

/** How every `eventMessage` of `instanceId` begins (its own bus drops them unparsed). */
export function eventPrefix(instanceId: string): string {
  return `{"t":"ev","from":${JSON.stringify(instanceId)},`;
}
