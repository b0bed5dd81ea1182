import { constants } from "node:fs";
import { chmod, stat } from "node:fs/promises";
import path from "node:path";
import { DIR_MODE, ensureDir } from "../../journal/fsutil.js";

export {
  appendSync,
  DIR_MODE,
  ensureDir,
  FILE_MODE,
  fileSize,
  isErrno,
  syncDir,
  writeAll,
} from "../../journal/fsutil.js";

import { InvalidParamsError } from "../../errors.js";
import type { Logger } from "../../log.js";

/** Flags for append-only files: create if missing, never truncate, writes go to the end. */
export const APPEND_FLAGS = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT;

/**
 * Layout under the state dir (one place names every path):
 *   gateway.lock                                   pid of the process that owns the dir
 *   sessions/index.jsonl (+ .snapshot.jsonl)       session entries (journal)
 *   agents/<agentId>/sessions/<sessionId>.jsonl    transcripts, one message per line
 *   runs/runs.jsonl, outbox/outbox.jsonl, kv/kv.jsonl   the other journals
 */
export const layout = {
  lock: (stateDir: string) => path.join(stateDir, "gateway.lock"),
  sessionsDir: (stateDir: string) => path.join(stateDir, "sessions"),
  runsDir: (stateDir: string) => path.join(stateDir, "runs"),
  outboxDir: (stateDir: string) => path.join(stateDir, "outbox"),
  kvDir: (stateDir: string) => path.join(stateDir, "kv"),
  transcriptDir: (stateDir: string, agentId: string) => path.join(stateDir, "agents", agentId, "sessions"),
  transcript: (stateDir: string, agentId: string, sessionId: string) =>
    path.join(stateDir, "agents", agentId, "sessions", `${sessionId}.jsonl`),
};

const SAFE_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** Ids become file names: refuse anything that could escape its folder. */
export function assertSafeSegment(field: string, value: unknown): asserts value is string {
  if (typeof value !== "string" || !SAFE_SEGMENT.test(value) || value.includes("..")) {
    throw new InvalidParamsError(`${field}: must match ${SAFE_SEGMENT.source} (it names a file)`, {
      field,
    });
  }
}

/** Creates the state dir 0700, or tightens an existing one that others could read. */
export async function ensureStateDir(dir: string, logger: Logger): Promise<void> {
  await ensureDir(dir);
  const st = await stat(dir);
  if ((st.mode & 0o077) !== 0) {
    await chmod(dir, DIR_MODE);
    logger.warn(
      { stateDir: dir, mode: (st.mode & 0o777).toString(8) },
      `state dir ${dir} was readable by other users (mode ${(st.mode & 0o777).toString(8)}); changed it to 700`,
    );
  }
}
