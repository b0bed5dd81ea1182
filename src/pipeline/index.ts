/**
 * The pipeline's public surface: the contract and the shared collect rule. Drivers
 * (`./local/`, `./bullmq/`) are imported only by the composition root, never through this file.
 */
export type {
  BackgroundJob,
  JobContext,
  JobHandlers,
  JobKind,
  Pipeline,
  RunEvent,
  SessionQueueInfo,
  TurnJob,
  TurnRequest,
  TurnResult,
} from "./types.js";
export { COLLECTABLE_ORIGINS, canCollect, RetryLaterError, UnrecoverableJobError } from "./types.js";
