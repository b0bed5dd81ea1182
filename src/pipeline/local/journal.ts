import { chmod, type FileHandle, open, readFile, rename, rm } from "node:fs/promises";
import path from "node:path";
import { errorMessage, SwitchboardError } from "../../errors.js";
import { CleanAppender, repairTornTail, storageError } from "../../journal/append.js";
import { DIR_MODE, ensureDir, FILE_MODE } from "../../journal/fsutil.js";
import type { Logger } from "../../log.js";
import { JournalModel } from "./journal-model.js";
import { type JournalRecord, journalRecordSchema } from "./schema.js";

/**
 * The local driver's durable queue: one append-only JSONL file `<stateDir>/queue/journal.jsonl`.
 *
 * - `append` applies the record to the in-memory model at once and resolves when the line is on
 *   disk. Appends made in the same tick (and while a write is in flight) share ONE write call
 *   (group commit), so the cost per accepted message is a string push, not a syscall.
 * - `open` replays the file; a torn last line (crash mid-write) is cut off (logged with its byte
 *   count) so later appends start on a clean line; other unreadable lines are skipped and
 *   reported in `warnings`.
 * - Appends follow the shared rules of `src/journal/append.ts`: a batch whose write fails (full
 *   disk) is cut back off the file and its awaited appends reject with STORAGE_UNAVAILABLE (no
 *   ack for a record not on disk); the next batch starts clean, so space returning is enough.
 * - Compaction rewrites only the live records (temp file + rename) in the background once the file
 *   is over `compactAfterBytes` and mostly dead. Appends made meanwhile wait and go to the new file.
 */

export interface JournalOptions {
  dir: string;
  logger: Logger;
  fsync: boolean;
  compactAfterBytes: number;
  completedCap: number;
}

export interface JournalStats {
  fileBytes: number;
  liveBytes: number;
  compactions: number;
  writes: number;
  /** fdatasync calls: only batches holding an awaited (`append`) record are synced. */
  syncs: number;
}

interface Batch {
  lines: string[];
  /** Holds a record someone awaits (`append`): fdatasync it before resolving (when `fsync`). */
  durable: boolean;
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export const JOURNAL_FILE = "journal.jsonl";

export class Journal {
  readonly model: JournalModel;
  readonly warnings: string[] = [];
  private fh: FileHandle | null = null;
  private out: CleanAppender | null = null;
  private batch: Batch | null = null;
  private flushScheduled = false;
  private flushing: Promise<void> | null = null;
  private compacting = false;
  private closed = false;
  private fileBytes = 0;
  private compactions = 0;
  private writes = 0;
  private syncs = 0;

  private constructor(
    private readonly file: string,
    private readonly opts: JournalOptions,
  ) {
    this.model = new JournalModel(opts.completedCap);
  }

  static async open(opts: JournalOptions): Promise<Journal> {
    await ensureDir(opts.dir);
    const j = new Journal(path.join(opts.dir, JOURNAL_FILE), opts);
    await rm(`${j.file}.tmp`, { force: true });
    await j.replay();
    j.fh = await open(j.file, "a", FILE_MODE);
    // files and folders from older versions were 0644/0755: they hold message text
    await j.fh.chmod(FILE_MODE);
    await chmod(opts.dir, DIR_MODE);
    j.out = new CleanAppender(j.fh.fd, j.fileBytes, "pipeline journal");
    j.maybeCompact();
    return j;
  }

  /**
   * Applies the record now; resolves once it is written — and, with `fsync`, fdatasynced, so an
   * accepted message survives an OS crash (rejects if the write failed).
   */
  append(rec: JournalRecord): Promise<void> {
    return this.add(rec, true);
  }

  /**
   * Fire-and-forget append: records whose loss only means a re-run after a crash. A batch of
   * notes alone is written but not fdatasynced (the next durable batch's fdatasync covers them).
   */
  note(rec: JournalRecord): void {
    if (this.closed) return;
    this.add(rec, false).catch(() => {
      // Logged once per failed batch in flush().
    });
  }

  private add(rec: JournalRecord, durable: boolean): Promise<void> {
    if (this.closed) return Promise.reject(new SwitchboardError("UNAVAILABLE", "pipeline journal is closed"));
    const line = JSON.stringify(rec);
    // Applied now so that duplicates and cancels see it at once; a failed write rejects the
    // promise, and the caller undoes it (acceptTurn/acceptJob) — the model then matches the file.
    this.model.apply(rec, line.length + 1);
    const batch = this.currentBatch();
    batch.lines.push(line);
    if (durable) batch.durable = true;
    this.scheduleFlush();
    return batch.promise;
  }

  /** `writes` counts batch writes (one syscall each), not records. */
  stats(): JournalStats {
    return {
      fileBytes: this.fileBytes,
      liveBytes: this.model.liveBytes,
      compactions: this.compactions,
      writes: this.writes,
      syncs: this.syncs,
    };
  }

  /** Writes everything appended so far, then closes the file. Later appends reject. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.compacting) await new Promise((r) => setImmediate(r));
    while (this.flushing || this.batch) await this.flush();
    await this.fh?.close();
    this.fh = null;
  }

  /** Rewrites the file with only the live records. Normally triggered by size; public for tests. */
  async compact(): Promise<void> {
    if (this.compacting || !this.fh) return;
    this.compacting = true;
    try {
      while (this.flushing) await this.flushing;
      // From here until the rename no batch is written. The snapshot already contains every record
      // appended so far; the batch pending right now still goes to the old file first, so a crash
      // before the rename loses nothing. Records appended after this point go to the new file.
      const snapshot = this.model.snapshot();
      const pending = this.batch;
      this.batch = null;
      if (pending) await this.writeBatch(pending);
      const tmp = `${this.file}.tmp`;
      let next: FileHandle | null = null;
      try {
        await rm(tmp, { force: true });
        // The handle follows the inode through the rename, so it becomes the new append handle.
        next = await open(tmp, "a", FILE_MODE);
        await next.writeFile(snapshot);
        await next.sync();
        await rename(tmp, this.file);
        if (this.opts.fsync) await syncDir(this.opts.dir);
      } catch (err) {
        await next?.close().catch(() => {});
        await rm(tmp, { force: true });
        this.opts.logger.error(
          { err: errorMessage(err) },
          "pipeline journal compaction failed; keeping old file",
        );
        return;
      }
      const old = this.fh;
      this.fh = next;
      this.fileBytes = Buffer.byteLength(snapshot);
      this.out = new CleanAppender(next.fd, this.fileBytes, "pipeline journal");
      await old?.close();
      this.compactions++;
    } finally {
      this.compacting = false;
      if (this.batch) this.scheduleFlush();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // internals

  private currentBatch(): Batch {
    if (this.batch) return this.batch;
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const promise = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A batch nobody awaits (only `note` records) must not become an unhandled rejection.
    promise.catch(() => {});
    this.batch = { lines: [], durable: false, promise, resolve, reject };
    return this.batch;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.flushing || this.compacting || !this.fh) return;
    this.flushScheduled = true;
    // setImmediate, not a microtask: lets every submit of this tick join the batch.
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush();
    });
  }

  private flush(): Promise<void> {
    if (!this.flushing) {
      this.flushing = this.drain().finally(() => {
        this.flushing = null;
        // An append between the loop's last check and here found `flushing` set and did not schedule.
        if (this.batch) this.scheduleFlush();
        this.maybeCompact();
      });
    }
    return this.flushing;
  }

  private async drain(): Promise<void> {
    while (this.batch && !this.compacting) {
      const b = this.batch;
      this.batch = null;
      await this.writeBatch(b);
    }
  }

  private async writeBatch(b: Batch): Promise<void> {
    const fh = this.fh;
    const out = this.out;
    if (!fh || !out) {
      b.reject(new SwitchboardError("UNAVAILABLE", "pipeline journal is not open"));
      return;
    }
    try {
      // A synchronous write(2): one batch of small lines into the page cache costs microseconds,
      // less than the thread-pool round trip of an async write. fdatasync stays asynchronous.
      // A failed write is cut back off the file (CleanAppender): the next batch starts clean.
      const written = out.append(`${b.lines.join("\n")}\n`);
      if (this.opts.fsync && b.durable) {
        await fh.datasync().catch((err: unknown) => {
          throw storageError(err, "pipeline journal");
        });
        this.syncs++;
      }
      this.fileBytes += written;
      this.writes++;
      b.resolve();
    } catch (err) {
      this.opts.logger.error(
        { err: errorMessage(err), records: b.lines.length },
        "pipeline journal write failed",
      );
      b.reject(err);
    }
  }

  private maybeCompact(): void {
    if (this.closed || this.compacting) return;
    if (this.fileBytes <= this.opts.compactAfterBytes) return;
    if (this.fileBytes <= 2 * this.model.liveBytes + 64 * this.model.completed.size) return;
    setImmediate(() => {
      if (!this.closed) void this.compact();
    });
  }

  private async replay(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw err;
    }
    if (text.length > 0 && !text.endsWith("\n")) {
      // A crash mid-write leaves a partial last line: cut the file back to the last whole record
      // so the next append does not glue onto the fragment (the shared journal rule).
      const torn = await repairTornTail(this.file);
      if (torn.cut > 0) this.warn(`journal: cut off a torn last record (${torn.cut} bytes)`);
      text = await readFile(this.file, "utf8");
    }
    this.fileBytes = Buffer.byteLength(text);
    let lineNo = 0;
    for (const line of text.split("\n")) {
      lineNo++;
      if (line.length === 0) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        this.warn(`journal: line ${lineNo} is not JSON; skipped`);
        continue;
      }
      const rec = journalRecordSchema.safeParse(parsed);
      if (!rec.success) {
        this.warn(`journal: line ${lineNo} is not a journal record; skipped`);
        continue;
      }
      this.model.apply(rec.data, line.length + 1);
    }
  }

  private warn(msg: string): void {
    this.warnings.push(msg);
    this.opts.logger.warn({ file: this.file }, msg);
  }
}

async function syncDir(dir: string): Promise<void> {
  const d = await open(dir, "r");
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}
