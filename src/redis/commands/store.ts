/** Every Lua script of the redis store (one file each, named `<operation>-<key count>`). */
import type { ScriptDef } from "../scripts.js";
import { appendTranscript } from "./appendTranscript-2.js";
import { archiveTranscript } from "./archiveTranscript-3.js";
import { completeOutbox } from "./completeOutbox-1.js";
import { deleteSession } from "./deleteSession-2.js";
import { leaseOutbox } from "./leaseOutbox-1.js";
import { putRun } from "./putRun-2.js";
import { putSession } from "./putSession-6.js";
import { releaseOutbox } from "./releaseOutbox-1.js";
import { streamTail } from "./streamTail-1.js";

export {
  appendTranscript,
  archiveTranscript,
  completeOutbox,
  deleteSession,
  leaseOutbox,
  putRun,
  putSession,
  releaseOutbox,
  streamTail,
};

export const STORE_SCRIPTS: readonly ScriptDef[] = [
  putSession,
  deleteSession,
  putRun,
  completeOutbox,
  releaseOutbox,
  archiveTranscript,
  appendTranscript,
  leaseOutbox,
  streamTail,
];
