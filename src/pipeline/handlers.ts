import type { TurnOutcome } from "../agent/runtime.js";
import type { BackgroundJob, JobContext, TurnJob } from "./types.js";

/**
 * The handler registry the pipeline runs: after-turn hooks (the flows in `src/flows/` register
 * them) and background job handlers by kind. The agent's turn handler (`agent/turn-handler.ts`)
 * wraps the runtime and calls these.
 */

export const REPLY_SKIP = "REPLY_SKIP";
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";

export type AfterTurnHook = (job: TurnJob, outcome: TurnOutcome) => Promise<void>;
export type BackgroundHandler = (job: BackgroundJob, ctx: JobContext) => Promise<void>;

export interface HandlerRegistry {
  afterTurn: AfterTurnHook[];
  background: Partial<Record<BackgroundJob["kind"], BackgroundHandler>>;
}

export function isSkipToken(text: string | undefined): boolean {
  const t = (text ?? "").trim();
  return t === REPLY_SKIP || t === ANNOUNCE_SKIP;
}
