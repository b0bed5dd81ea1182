/**
 * Every Lua script of the bullmq pipeline (one file each, named `<operation>-<key count>`): its
 * multi-key changes, each atomic. Keys come from `src/pipeline/bullmq/keys.ts`; all share one hash tag, so the run/cancel keys a
 * script derives from a prefix argument live in the same Cluster slot as its declared keys.
 *
 * Run states (`st` in `{tag}:run:<id>`): q = in the mailbox, a = taken into a turn, d = finished,
 * x = cancelled while queued. `{tag}:outbox` holds committed follow-ups until they are relayed.
 */
import type { ScriptDef } from "../scripts.js";
import { ackTurn } from "./ackTurn-5.js";
import { cancelRun } from "./cancelRun-3.js";
import { checkOwner } from "./checkOwner-1.js";
import { commitTurn } from "./commitTurn-3.js";
import { extendLock } from "./extendLock-1.js";
import { extendTurn } from "./extendTurn-2.js";
import { submitTurn } from "./submitTurn-4.js";
import { sweepSession } from "./sweepSession-3.js";
import { takeTurn } from "./takeTurn-4.js";

export {
  ackTurn,
  cancelRun,
  checkOwner,
  commitTurn,
  extendLock,
  extendTurn,
  submitTurn,
  sweepSession,
  takeTurn,
};

export const PIPELINE_SCRIPTS: readonly ScriptDef[] = [
  submitTurn,
  takeTurn,
  extendTurn,
  checkOwner,
  commitTurn,
  ackTurn,
  cancelRun,
  sweepSession,
  extendLock,
];
