import { open, readFile, stat, unlink } from "node:fs/promises";
import { SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { FILE_MODE, isErrno } from "./paths.js";

/** Lock files held by this process: a lock naming our own pid that is not here is a leftover. */
const held = new Set<string>();

/**
 * One process per state dir: `gateway.lock` holds the owner's pid and is created with O_EXCL.
 * A lock whose pid is dead is stale and taken over, and so is one naming our own pid that
 * this process does not hold (a container restarted with the same pid). Two processes taking
 * over the same stale lock at the same instant is not guarded against (both would have to
 * start within microseconds of each other after a crash); every other case is CONFLICT.
 */
export class StateDirLock {
  private released = false;

  private constructor(
    readonly file: string,
    private readonly pid: number,
  ) {}

  static async acquire(file: string, stateDir: string, logger: Logger): Promise<StateDirLock> {
    const pid = process.pid;
    const inUse = (owner: number) =>
      new SwitchboardError(
        "CONFLICT",
        `state dir ${stateDir} is in use by another Switchboard process (pid ${owner}); stop it or use another stateDir`,
        { details: { stateDir, pid: owner } },
      );
    for (let attempt = 0; attempt < 3; attempt++) {
      if (held.has(file)) throw inUse(pid);
      try {
        const fh = await open(file, "wx", FILE_MODE);
        held.add(file);
        try {
          await fh.writeFile(`${pid}\n`);
        } catch (err) {
          held.delete(file);
          await unlink(file).catch(() => {});
          throw err;
        } finally {
          await fh.close();
        }
        return new StateDirLock(file, pid);
      } catch (err) {
        if (!isErrno(err, "EEXIST")) throw err;
      }
      const owner = await readPid(file);
      const leftover = owner === pid && !held.has(file);
      if (owner !== null && !leftover && isAlive(owner)) throw inUse(owner);
      if (owner === null && (await youngerThanMs(file, 2000))) {
        // an empty lock this fresh is another process between creating and writing it
        throw new SwitchboardError(
          "CONFLICT",
          `state dir ${stateDir} is being locked by another process; retry`,
          {
            details: { stateDir },
          },
        );
      }
      logger.warn(
        { lock: file, pid: owner },
        leftover
          ? `taking over stale lock ${file} (it names this process's pid ${pid}, left by an earlier run)`
          : `taking over stale lock ${file} (pid ${owner ?? "unreadable"} is not running)`,
      );
      try {
        await unlink(file);
      } catch (err) {
        if (!isErrno(err, "ENOENT")) throw err;
      }
    }
    throw new SwitchboardError("CONFLICT", `could not acquire ${file}: another process keeps recreating it`, {
      details: { stateDir },
    });
  }

  /** Removes the lock if it is still ours. Idempotent. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    held.delete(this.file);
    if ((await readPid(this.file)) !== this.pid) return;
    try {
      await unlink(this.file);
    } catch (err) {
      if (!isErrno(err, "ENOENT")) throw err;
    }
  }
}

async function youngerThanMs(file: string, ms: number): Promise<boolean> {
  try {
    return Date.now() - (await stat(file)).mtimeMs < ms;
  } catch {
    return false;
  }
}

async function readPid(file: string): Promise<number | null> {
  try {
    const text = (await readFile(file, "utf8")).trim();
    const pid = Number.parseInt(text, 10);
    return Number.isInteger(pid) && pid > 0 && String(pid) === text ? pid : null;
  } catch (err) {
    if (isErrno(err, "ENOENT")) return null;
    throw err;
  }
}

/** Signal 0 checks existence without touching the process; EPERM means it exists but is not ours. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return isErrno(err, "EPERM");
  }
}
