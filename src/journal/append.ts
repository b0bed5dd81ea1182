import { ftruncateSync } from "node:fs";
import { open } from "node:fs/promises";
import { SwitchboardError } from "../errors.js";
import { appendSync } from "./fsutil.js";

/**
 * The rules every append-only JSONL file of the gateway follows (the journal — used by the fs
 * store and the local queue — and transcripts):
 * - every record starts on a fresh line: a write that failed part-way is cut back to where it
 *   started (ftruncate), so the next record is never glued onto a fragment;
 * - a full disk, a quota or an I/O error reaches the caller as STORAGE_UNAVAILABLE with a clear
 *   message — never as an ack for a record that is not on disk — and the same open file
 *   recovers by itself once space returns (no restart);
 * - at open, a torn tail (a crash mid-write) is cut back to the last whole record.
 */

const STORAGE_ERRNOS = new Set(["ENOSPC", "EDQUOT", "EIO", "EROFS", "EFBIG", "ENOMEM"]);

/** Maps a disk-level failure to STORAGE_UNAVAILABLE (other errors pass through). */
export function storageError(err: unknown, what: string): unknown {
  if (err instanceof SwitchboardError) return err;
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  if (typeof code !== "string" || !STORAGE_ERRNOS.has(code)) return err;
  const why =
    code === "ENOSPC"
      ? "the disk is full"
      : code === "EDQUOT"
        ? "the disk quota is exhausted"
        : code === "EROFS"
          ? "the file system is read-only"
          : `the disk reported ${code}`;
  return new SwitchboardError(
    "STORAGE_UNAVAILABLE",
    `${what}: ${why}; nothing was recorded — free space on the state dir's disk, then retry`,
    { cause: err, details: { errno: code } },
  );
}

/**
 * Synchronous appends to one file descriptor (opened with O_APPEND) whose size is known. A
 * failed write is truncated back to the last whole record; if even that fails, the next write
 * tries the truncation again first and, failing that, starts with a newline.
 */
export class CleanAppender {
  /** Bytes of whole records in the file. */
  size: number;
  /** A failed write may have left bytes after `size`. */
  private dirty = false;

  constructor(
    private readonly fd: number,
    size: number,
    private readonly what: string,
  ) {
    this.size = size;
  }

  /** Appends `text` (whole records, each ending with "\n"); returns the bytes written. */
  append(text: string): number {
    let prefix = "";
    if (this.dirty) {
      try {
        ftruncateSync(this.fd, this.size);
        this.dirty = false;
      } catch {
        prefix = "\n"; // cannot cut the fragment off: at least start a fresh line
      }
    }
    try {
      const n = appendSync(this.fd, prefix + text);
      if (prefix) this.dirty = false;
      this.size += n;
      return n;
    } catch (err) {
      try {
        ftruncateSync(this.fd, this.size);
      } catch {
        this.dirty = true;
      }
      throw storageError(err, this.what);
    }
  }

  /**
   * Takes everything after `size` back off the file (a batch that was written but must not
   * count, e.g. its fdatasync failed). If the truncation fails, the next append retries it.
   */
  cutBack(size: number): void {
    this.size = size;
    try {
      ftruncateSync(this.fd, size);
      this.dirty = false;
    } catch {
      this.dirty = true;
    }
  }
}

/**
 * Cuts a torn tail (bytes after the last newline) off `file`: when those bytes are a whole JSON
 * value (the newline itself was lost) a newline is added instead. Returns the bytes cut (0 when
 * the file ends cleanly or does not exist).
 */
export async function repairTornTail(file: string): Promise<{ cut: number; completed: boolean }> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, "r+");
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return { cut: 0, completed: false };
    throw err;
  }
  try {
    const { size } = await fh.stat();
    if (size === 0) return { cut: 0, completed: false };
    const chunk = 64 * 1024;
    let end = size;
    let lastNl = -1;
    const parts: Buffer[] = [];
    while (end > 0 && lastNl < 0) {
      const start = Math.max(0, end - chunk);
      const buf = Buffer.alloc(end - start);
      await fh.read(buf, 0, buf.length, start);
      const i = buf.lastIndexOf(0x0a);
      if (i >= 0) {
        lastNl = start + i;
        parts.unshift(buf.subarray(i + 1));
      } else parts.unshift(buf);
      end = start;
    }
    const keep = lastNl + 1;
    if (keep === size) return { cut: 0, completed: false };
    const tail = Buffer.concat(parts).toString("utf8");
    try {
      JSON.parse(tail);
      await fh.write("\n", size);
      return { cut: 0, completed: true };
    } catch {
      await fh.truncate(keep);
      return { cut: size - keep, completed: false };
    }
  } finally {
    await fh.close();
  }
}
