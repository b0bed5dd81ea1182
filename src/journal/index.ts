import { type FileHandle, open, readdir, rename, unlink } from "node:fs/promises";
import path from "node:path";
import { SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";
import { CleanAppender, repairTornTail, storageError } from "./append.js";
import { ensureDir, FILE_MODE, fileSize, isErrno, syncDir, writeAll } from "./fsutil.js";
import { forEachLine } from "./lines.js";

/**
 * The gateway's one append-only record log with background compaction: the durable half of an
 * in-memory map. Used by the fs store (sessions, runs, outbox, kv: src/store/fs/) and by the
 * local pipeline's queue (src/pipeline/local/journal.ts, with `fsync`).
 *
 * Files in `dir` for journal `name`:
 *   <name>.jsonl            the live log; first line `{"$log":G}`, then one record per line
 *   <name>.<g>.jsonl        logs rotated out by a compaction that has not finished yet
 *   <name>.snapshot.jsonl   `{"$snapshot":S}` then records: the state of every log with g < S
 *
 * Compaction never blocks the request path on work that grows with the state: between two
 * batched writes the live log is renamed to `<name>.<G>.jsonl` and a new live log `G+1` is
 * started (O(1)); the state is captured by reference at that instant (records are immutable);
 * the snapshot is then written to a temp file in slices, fsynced and renamed over the old
 * one, and only then are the rotated logs deleted. A crash at any step leaves a snapshot plus
 * logs that replay to the same state (records are whole values, so replay is last-writer-wins).
 *
 * Torn writes and full disks (src/journal/append.ts): at open a torn tail of the live log is
 * cut back to the last whole record (logged with the byte count); a batch whose write fails is
 * cut back off the file, its appends reject with STORAGE_UNAVAILABLE, and the next batch
 * starts clean on the same open file — so the journal recovers by itself once space returns.
 *
 * Durability: by default a write resolves once it reached the OS (one write(2) per batch: the
 * appends made in one event-loop phase, plus those made while a write is in flight), without
 * fsync. That survives a process crash, not a power loss; snapshots are fsynced because they
 * replace older files. With `fsync`, a batch holding at least one awaited `append` is
 * fdatasynced before those appends resolve (an OS crash cannot lose them); a batch of only
 * fire-and-forget `note`s is written but not synced (the next synced batch covers it). A failed
 * fdatasync cuts the batch back off the file and its appends reject with STORAGE_UNAVAILABLE.
 *
 * Two ways to own a journal: apply a record to memory in `apply` (after the write — the fs
 * store), or apply it when appending and undo it if the append rejects (the local queue, whose
 * duplicates and cancels must see a record at once). Both hold because the state is captured for
 * a snapshot in the same synchronous step as the last write to the rotated log: nothing queued
 * is in the state without being in that log.
 */
/** Where problems found while reading go (logged once, kept for health and doctor). */
export interface WarningSink {
  add(message: string, fields?: Record<string, unknown>): void;
}

/**
 * Where a record read at load lies (for an owner that reads records back from the files
 * instead of keeping them in memory). One object per file, updated for each line: copy what
 * you keep.
 */
export interface LineAt {
  /** The file as named when it was read (it may be renamed later; an open fd stays valid). */
  file: string;
  /** true for the snapshot, false for a log. */
  snapshot: boolean;
  /** The snapshot's S or the log's G (from the header; 0 before it). */
  gen: number;
  /** Byte offset of the line's first byte. */
  offset: number;
  /** Bytes of the line without its newline. */
  length: number;
}

/** What `readLine` returns for a line that is not JSON (skipped with an "unreadable" warning). */
export const UNREADABLE: unique symbol = Symbol("unreadable");

export interface JournalOptions<R> {
  dir: string;
  name: string;
  logger: Logger;
  warnings: WarningSink;
  /** Compact after this many appended records (and at least a quarter of the live state). */
  compactEveryAppends: number;
  /**
   * fdatasync every batch that holds an awaited `append` before resolving it (default false).
   * `apply` still runs right after the write; if the sync fails the batch is cut back off the
   * file and its appends reject, so an owner undoes on rejection what `apply` did.
   */
  fsync?: boolean;
  /** Checks one parsed line; null marks it invalid (skipped with a warning). */
  decode: (value: unknown) => R | null;
  /**
   * Optional: decodes a raw line (header lines excepted) instead of `JSON.parse` + `decode`,
   * for owners that need only part of each record at load. null: invalid; UNREADABLE: not JSON.
   */
  readLine?: (line: Buffer, at: LineAt) => R | null | typeof UNREADABLE;
  /**
   * Optional: replays the snapshot's records from somewhere faster than its lines (the fs
   * session store's sidecar index), through `replay`'s owner, before the logs are read. Resolves
   * false (having replayed nothing) to have the snapshot's lines read as usual.
   */
  loadSnapshot?: (snapshot: { file: string; gen: number; bytes: number }) => Promise<boolean>;
  /** Applies one record while loading. */
  replay: (record: R, at: LineAt) => void;
  /** The whole current state as records; called synchronously at the rotation point. */
  snapshot: () => R[];
  /** A record's snapshot line without the newline (default `JSON.stringify`). */
  serialize?: (record: R) => string;
  /**
   * Called once a snapshot is in place (renamed, before older logs are deleted), with each
   * record's byte offset in it (and one more: the end of the last line's newline), so an owner
   * that reads records from the files can re-point them.
   */
  snapshotWritten?: (written: { file: string; gen: number; records: R[]; offsets: number[] }) => void;
  /** Compute each appended record's byte offset in the live log (passed to `apply`). */
  locate?: boolean;
  /** How long a `noteJsonLater` record waits for a batch to ride with (default 1000 ms). */
  laterMs?: number;
  /** Number of live records, to scale the compaction threshold with the state. */
  size: () => number;
}

/** Counters for tests and introspection. */
export interface JournalStats {
  /** Batch writes: one write(2) each, however many records. */
  writes: number;
  /** fdatasync calls (with `fsync`: only batches holding an awaited append). */
  syncs: number;
  /** Snapshots completed since open. */
  compactions: number;
  /** Bytes on disk: live log, rotated logs not yet deleted, snapshot. */
  bytes: number;
}

interface Pending {
  text: string;
  records: number;
  /** An `append` someone awaits (not a `note`): with `fsync`, its batch is synced first. */
  awaited: boolean;
  apply: (offset: number) => void;
  resolve: () => void;
  reject: (err: unknown) => void;
}

const SNAPSHOT_SLICE = 2000;

export class Journal<R> {
  private fh: FileHandle | null = null;
  private out: CleanAppender | null = null;
  private gen = 1;
  private appendsSinceSnapshot = 0;
  private pending: Pending[] = [];
  private flushing: Promise<void> | null = null;
  /**
   * `pending` holds a record that wants a write (anything but `noteJsonLater`'s), or their
   * timer or `close` asks for one. Without it, the flush loop leaves `pending` for the next batch.
   */
  private wantsWrite = false;
  /** Writes `noteJsonLater` records that no batch took along within `laterMs`. */
  private laterTimer: NodeJS.Timeout | null = null;
  /** The flush loop is swapping the live log (no write may start). */
  private rotating = false;
  private rotateWaiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  private snapshotting: Promise<void> | null = null;
  /** An fdatasync of the last batch is in flight: nothing else may be written meanwhile. */
  private syncing = false;
  /** Why the last failed batch failed (for the rotation that wrote it). */
  private lastError: unknown = null;
  private aborting = false;
  private closed = false;
  private writes = 0;
  private syncs = 0;
  private compactions = 0;
  private snapshotBytes = 0;
  private rotatedBytes = 0;

  private constructor(private readonly opts: JournalOptions<R>) {}

  /** Generation of the live log (the one `apply` offsets refer to). */
  get generation(): number {
    return this.gen;
  }

  get livePath(): string {
    return path.join(this.opts.dir, `${this.opts.name}.jsonl`);
  }

  get snapshotPath(): string {
    return path.join(this.opts.dir, `${this.opts.name}.snapshot.jsonl`);
  }

  private rotatedPath(gen: number): string {
    return path.join(this.opts.dir, `${this.opts.name}.${gen}.jsonl`);
  }

  /** Loads snapshot and logs through `opts.replay`, then opens the live log for appending. */
  static async open<R>(opts: JournalOptions<R>): Promise<Journal<R>> {
    const j = new Journal(opts);
    await j.load();
    return j;
  }

  // ---------------------------------------------------------------- loading

  private async load(): Promise<void> {
    const { dir, name } = this.opts;
    await ensureDir(dir);
    const rotated: number[] = [];
    const rotatedRe = new RegExp(`^${escapeRe(name)}\\.(\\d+)\\.jsonl$`);
    for (const f of await readdir(dir)) {
      const m = rotatedRe.exec(f);
      if (m) rotated.push(Number(m[1]));
      else if (f === `${name}.snapshot.jsonl.tmp`) await unlink(path.join(dir, f)); // unfinished compaction
    }
    rotated.sort((a, b) => a - b);

    let snapGen = 0;
    const snapBytes = await fileSize(this.snapshotPath);
    if (snapBytes >= 0) {
      this.snapshotBytes = snapBytes;
      const gen = this.opts.loadSnapshot ? await snapshotGen(this.snapshotPath) : null;
      if (
        gen !== null &&
        (await this.opts.loadSnapshot!({ file: this.snapshotPath, gen, bytes: snapBytes }))
      ) {
        snapGen = gen;
      } else {
        await this.readFile(this.snapshotPath, (header) => {
          snapGen = header.$snapshot ?? 0;
        });
      }
    }
    for (const g of rotated) {
      if (g < snapGen)
        await unlink(this.rotatedPath(g)); // already in the snapshot
      else {
        this.rotatedBytes += Math.max(0, await fileSize(this.rotatedPath(g)));
        this.appendsSinceSnapshot += await this.readFile(this.rotatedPath(g), () => {});
      }
    }
    const minGen = Math.max(snapGen, (rotated.at(-1) ?? 0) + 1, 1);
    // A live log without a `{"$log":G}` header (written before this format) replays as is and
    // becomes generation `minGen`; the first rotation moves it out like any other log.
    let liveGen = 0;
    const torn = await repairTornTail(this.livePath);
    if (torn.cut > 0) {
      this.opts.warnings.add(`${this.livePath}: torn last line (${torn.cut} bytes) cut off`, {
        file: this.livePath,
        bytes: torn.cut,
      });
    }
    const liveBytes = await fileSize(this.livePath);
    if (liveBytes > 0) {
      this.appendsSinceSnapshot += await this.readFile(this.livePath, (header) => {
        liveGen = header.$log ?? 0;
      });
    }
    this.gen = Math.max(liveGen, minGen);
    this.fh = await open(this.livePath, "a", FILE_MODE);
    let size = Math.max(0, liveBytes);
    if (liveBytes <= 0) size = await writeAll(this.fh, `{"$log":${this.gen}}\n`);
    this.out = new CleanAppender(this.fh.fd, size, `journal ${this.opts.name}`);
    this.maybeCompact();
  }

  /** Replays one file; returns the number of records read. */
  private async readFile(
    file: string,
    onHeader: (h: { $log?: number; $snapshot?: number }) => void,
  ): Promise<number> {
    let records = 0;
    const base = path.basename(file);
    const at: LineAt = { file, snapshot: file === this.snapshotPath, gen: 0, offset: 0, length: 0 };
    const readLine = this.opts.readLine;
    await forEachLine(file, (buf, info) => {
      let record: R | null | typeof UNREADABLE = UNREADABLE;
      at.offset = info.offset;
      at.length = buf.length;
      if (readLine && !(info.lineNo === 1 && buf[0] === 0x7b && buf[1] === 0x22 && buf[2] === 0x24)) {
        record = readLine(buf, at); // not a header ({"$…): the owner decodes it
      } else {
        let value: unknown;
        try {
          value = JSON.parse(buf.toString("utf8"));
        } catch {
          value = UNREADABLE;
        }
        if (info.lineNo === 1 && isHeader(value)) {
          onHeader(value);
          at.gen = value.$snapshot ?? value.$log ?? 0;
          return;
        }
        if (value !== UNREADABLE) record = readLine ? readLine(buf, at) : this.opts.decode(value);
      }
      if (record === UNREADABLE) {
        const what = info.terminated ? `unreadable line ${info.lineNo}` : `torn last line ${info.lineNo}`;
        this.opts.warnings.add(`${path.join(this.opts.dir, base)}: ${what} skipped`, {
          file,
          line: info.lineNo,
        });
        return;
      }
      if (record === null) {
        this.opts.warnings.add(
          `${path.join(this.opts.dir, base)}: invalid record on line ${info.lineNo} skipped`,
          {
            file,
            line: info.lineNo,
          },
        );
        return;
      }
      this.opts.replay(record, at);
      records++;
    });
    return records;
  }

  // ---------------------------------------------------------------- appending

  /**
   * Appends records; `apply` runs right after they reached the OS and before anything else is
   * written, so in-memory state always equals what the files replay to. Resolves after `apply`
   * (with `fsync`, after the batch's fdatasync too).
   */
  append(records: R | R[], apply: (offset: number) => void): Promise<void> {
    const list = Array.isArray(records) ? records : [records];
    let text = "";
    for (const r of list) text += `${JSON.stringify(r)}\n`;
    return this.appendText(text, list.length, apply);
  }

  /**
   * Fire-and-forget `append` (in the same batches, same order): for a record whose loss after a
   * crash is harmless. Nobody awaits it, so with `fsync` a batch of notes alone is not synced. A
   * failed batch is logged once (never an unhandled rejection); after `close` a note is dropped.
   */
  note(records: R | R[], apply: (offset: number) => void = noop): void {
    const list = Array.isArray(records) ? records : [records];
    let text = "";
    for (const r of list) text += `${JSON.stringify(r)}\n`;
    this.noteText(text, list.length, apply);
  }

  /** `note` for a caller that already has the record's JSON (no newline). */
  noteJson(json: string, apply: (offset: number) => void = noop): void {
    this.noteText(`${json}\n`, 1, apply);
  }

  /** `later`: start no write (see `noteJsonLater`). */
  private noteText(text: string, records: number, apply: (offset: number) => void, later = false): void {
    if (this.closed) return;
    this.pending.push({ text, records, awaited: false, apply, resolve: noop, reject: noop });
    if (later) {
      if (!this.flushing) this.armLater(); // a running loop arms it when it stops
      return;
    }
    this.wantsWrite = true;
    this.kick();
  }

  /**
   * `noteJson` that starts no write of its own: the record rides with the next batch (the next
   * append's write, a rotation, `close`) or is written `laterMs` (1 s by default) later at the
   * latest. For a record whose loss after a crash is harmless, written often enough that a
   * write(2) of its own shows in the CPU per turn (the local queue's turn `start` and `done`, a
   * run marked running). A crash inside that window loses it, as an OS crash loses a `note`.
   */
  noteJsonLater(json: string): void {
    this.noteText(`${json}\n`, 1, noop, true);
  }

  private armLater(): void {
    if (this.laterTimer) return;
    this.laterTimer = setTimeout(() => {
      this.laterTimer = null;
      this.writeWaiting();
    }, this.opts.laterMs ?? 1000);
    this.laterTimer.unref();
  }

  /** Starts a write of what waits in `pending` (records of `noteJsonLater`), if anything does. */
  private writeWaiting(): void {
    if (this.closed || this.pending.length === 0) return;
    this.wantsWrite = true;
    this.kick();
  }

  stats(): JournalStats {
    return {
      writes: this.writes,
      syncs: this.syncs,
      compactions: this.compactions,
      bytes: (this.out?.size ?? 0) + this.rotatedBytes + this.snapshotBytes,
    };
  }

  /**
   * `append`, written at once (with everything queued before it, so order is kept) instead of
   * after the current I/O phase — for a record whose loss a crash would make visible, such as
   * the outbox mark right after a platform accepted a message: the window between the
   * platform's yes and the mark reaching the OS shrinks from the rest of the event-loop phase
   * to the synchronous step that called this. During a log rotation (or an fdatasync) it waits
   * for it.
   */
  appendNow(records: R | R[], apply: () => void): Promise<void> {
    const done = this.append(records, apply);
    if (!this.closed && !this.rotating && !this.syncing && this.out) void this.writePending();
    return done;
  }

  /**
   * `append` for a caller that already has the record's JSON (`JSON.stringify(record)`, no
   * newline): saves serialising it twice.
   */
  appendJson(json: string, apply: (offset: number) => void): Promise<void> {
    return this.appendText(`${json}\n`, 1, apply);
  }

  private appendText(text: string, records: number, apply: (offset: number) => void): Promise<void> {
    if (this.closed) return Promise.reject(closedError(this.opts.name));
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ text, records, awaited: true, apply, resolve, reject });
      this.wantsWrite = true;
      this.kick();
    });
  }

  /**
   * Starts the flush loop after the current I/O phase (setImmediate), so every append made by
   * the callbacks of that phase — many concurrent turns — shares one write(2).
   */
  private kick(): void {
    if (this.flushing) return;
    this.flushing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.flushLoop());
  }

  private async flushLoop(): Promise<void> {
    try {
      for (;;) {
        if (this.rotateWaiters.length > 0 && !this.snapshotting) {
          this.rotating = true;
          try {
            await this.rotate();
          } finally {
            this.rotating = false;
          }
          continue;
        }
        if (!this.wantsWrite) {
          // Cleared in the same synchronous step as this last check (a rotation still waiting
          // here is kicked when the running snapshot ends): anything queued from now on starts
          // a new loop, anything queued before was seen. A gap would strand it forever. Records
          // of `noteJsonLater` left behind wait for the next batch, or their timer.
          this.flushing = null;
          if (this.pending.length > 0) this.armLater();
          return;
        }
        const written = this.writePending();
        if (written !== true && written !== false) await written;
      }
    } catch (err) {
      this.flushing = null;
      throw err;
    }
  }

  /**
   * One write(2) of everything queued, then `apply` for each append, then resolve (or reject)
   * them. true/false: written and settled, or failed; a promise: the batch is being fdatasynced
   * (no other write may start until it settles; it resolves to whether the sync succeeded).
   */
  private writePending(): boolean | Promise<boolean> {
    const batch = this.pending.splice(0);
    this.wantsWrite = false;
    const text = batch.map((b) => b.text).join("");
    const start = this.out!.size;
    try {
      this.out!.append(text); // a failed write is cut back off: the next batch starts clean
    } catch (err) {
      this.failed(batch, err, "journal write failed");
      return false;
    }
    this.writes++;
    // where each record landed: the batch is the last `text` bytes of the file
    let offset = this.opts.locate ? this.out!.size - Buffer.byteLength(text) : -1;
    let awaited = false;
    for (const b of batch) {
      this.appendsSinceSnapshot += b.records;
      if (b.awaited) awaited = true;
      try {
        b.apply(offset);
        if (offset >= 0) offset += Buffer.byteLength(b.text);
      } catch (err) {
        this.opts.logger.error({ err, journal: this.opts.name }, "journal apply failed");
      }
    }
    if (this.opts.fsync && awaited) return this.syncBatch(batch, start);
    for (const b of batch) b.resolve();
    this.maybeCompact();
    return true;
  }

  private async syncBatch(batch: Pending[], start: number): Promise<boolean> {
    this.syncing = true;
    try {
      await this.fh!.datasync();
      this.syncs++;
    } catch (err) {
      // Not known to be on disk: take it off the file, so a rejected append is never replayed.
      // Nothing was written after it (a sync holds every other write back).
      this.out!.cutBack(start);
      this.failed(batch, storageError(err, `journal ${this.opts.name}`), "journal fdatasync failed");
      return false;
    } finally {
      this.syncing = false;
    }
    for (const b of batch) b.resolve();
    this.maybeCompact();
    return true;
  }

  /**
   * Rejects a failed batch's appends (logged once for the whole batch) and any rotation waiting
   * for the loop: an owner that applied those records when appending has not undone them yet, so
   * its state must not be captured before its rejection handlers ran (maybeCompact retries).
   */
  private failed(batch: Pending[], err: unknown, msg: string): void {
    this.opts.logger.error({ err, journal: this.opts.name, records: batch.length }, msg);
    this.lastError = err;
    for (const b of batch) b.reject(err);
    for (const w of this.rotateWaiters.splice(0)) w.reject(err);
  }

  // ---------------------------------------------------------------- compaction

  private maybeCompact(): void {
    if (this.closed || this.snapshotting || this.rotating || this.rotateWaiters.length > 0) return;
    // scaling with the state bounds both the rewrite cost per append (≤ 4 records) and the
    // log replayed at start-up (≤ 25% of the snapshot)
    const threshold = Math.max(this.opts.compactEveryAppends, Math.floor(this.opts.size() / 4));
    if (this.appendsSinceSnapshot < threshold) return;
    this.requestRotation().catch((err: unknown) =>
      this.opts.logger.warn(
        { err, journal: this.opts.name },
        "background compaction failed; will retry later",
      ),
    );
  }

  /** Compacts now (after any compaction already running); resolves when the snapshot is on disk. */
  async compact(): Promise<void> {
    if (this.closed) throw closedError(this.opts.name);
    if (this.snapshotting) await this.snapshotting.catch(() => {});
    await this.requestRotation();
    await this.snapshotting;
  }

  private requestRotation(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.rotateWaiters.push({ resolve, reject });
      this.kick();
    });
  }

  /** Runs inside the flush loop, so no write is in flight and state matches the files. */
  private async rotate(): Promise<void> {
    // Queued appends go to the old log first, and the state is captured in the same synchronous
    // step: an owner that applies records when appending (before the write) holds exactly what
    // the old logs replay to, and everything appended from here on goes to the new log.
    let written: boolean | Promise<boolean> = true;
    if (this.pending.length > 0) written = this.writePending();
    if (written === false) return; // failed() rejected the waiting rotations
    const waiters = this.rotateWaiters.splice(0);
    const records = this.opts.snapshot();
    const appendsBefore = this.appendsSinceSnapshot;
    this.appendsSinceSnapshot = 0;
    if (written !== true && !(await written)) {
      this.appendsSinceSnapshot += appendsBefore;
      for (const w of waiters) w.reject(this.lastError);
      return;
    }
    const oldGen = this.gen;
    try {
      await this.fh!.close();
      this.fh = null;
      await rename(this.livePath, this.rotatedPath(oldGen));
      this.rotatedBytes += this.out!.size;
      this.gen = oldGen + 1;
      this.fh = await open(this.livePath, "a", FILE_MODE);
      this.out = new CleanAppender(this.fh.fd, 0, `journal ${this.opts.name}`);
      this.out.append(`{"$log":${this.gen}}\n`);
    } catch (err) {
      if (!this.fh) {
        this.fh = await open(this.livePath, "a", FILE_MODE);
        this.out = new CleanAppender(this.fh.fd, (await this.fh.stat()).size, `journal ${this.opts.name}`);
      }
      this.appendsSinceSnapshot += appendsBefore;
      for (const w of waiters) w.reject(storageError(err, `journal ${this.opts.name}`));
      return;
    }
    const done = this.writeSnapshot(records, this.gen);
    this.snapshotting = done;
    done
      .then(
        () => {
          for (const w of waiters) w.resolve();
        },
        (err: unknown) => {
          for (const w of waiters) w.reject(err);
        },
      )
      .finally(() => {
        this.snapshotting = null;
        if (!this.closed) {
          if (this.rotateWaiters.length > 0) this.kick();
          else this.maybeCompact();
        }
      });
  }

  private async writeSnapshot(records: R[], gen: number): Promise<void> {
    const tmp = `${this.snapshotPath}.tmp`;
    const fh = await open(tmp, "w", FILE_MODE);
    let snapshotOffsets: number[] | null = null;
    try {
      const serialize = this.opts.serialize ?? JSON.stringify;
      const offsets: number[] | null = this.opts.snapshotWritten
        ? new Array<number>(records.length + 1)
        : null;
      let offset = await writeAll(fh, `{"$snapshot":${gen}}\n`);
      for (let i = 0; i < records.length; i += SNAPSHOT_SLICE) {
        if (this.aborting) throw new SwitchboardError("UNAVAILABLE", "compaction aborted: store closing");
        let text = "";
        let sliceBytes = 0;
        const end = Math.min(records.length, i + SNAPSHOT_SLICE);
        for (let k = i; k < end; k++) {
          const line = `${serialize(records[k]!)}\n`;
          if (offsets) {
            offsets[k] = offset + sliceBytes;
            sliceBytes += Buffer.byteLength(line);
          }
          text += line;
        }
        offset += await writeAll(fh, text); // each slice yields to the event loop
      }
      if (offsets) offsets[records.length] = offset;
      snapshotOffsets = offsets;
      await fh.sync();
    } catch (err) {
      await fh.close();
      await unlink(tmp).catch(() => {});
      throw err;
    }
    await fh.close();
    await rename(tmp, this.snapshotPath);
    this.snapshotBytes = snapshotOffsets?.[records.length] ?? (await fileSize(this.snapshotPath));
    this.compactions++;
    if (snapshotOffsets) {
      this.opts.snapshotWritten?.({ file: this.snapshotPath, gen, records, offsets: snapshotOffsets });
    }
    await syncDir(this.opts.dir);
    for (let g = gen - 1; g > 0; g--) {
      try {
        await unlink(this.rotatedPath(g));
      } catch (err) {
        if (isErrno(err, "ENOENT")) break; // older ones were removed by earlier compactions
        throw err;
      }
    }
    this.rotatedBytes = 0;
  }

  // ---------------------------------------------------------------- closing

  /** Waits for queued writes, abandons a running snapshot (its logs stay), closes. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.laterTimer) clearTimeout(this.laterTimer);
    this.laterTimer = null;
    this.writeWaiting();
    while (this.flushing) await this.flushing;
    this.closed = true;
    this.aborting = true;
    for (const w of this.rotateWaiters.splice(0)) w.reject(closedError(this.opts.name));
    if (this.snapshotting) await this.snapshotting.catch(() => {});
    await this.fh?.close();
    this.fh = null;
    this.out = null;
  }
}

function noop(): void {}

/** The S of a snapshot's `{"$snapshot":S}` first line, or null when it has none. */
async function snapshotGen(file: string): Promise<number | null> {
  const fh = await open(file, "r");
  try {
    const buf = Buffer.alloc(64);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
    if (nl < 0) return null;
    const v: unknown = JSON.parse(buf.toString("utf8", 0, nl));
    return isHeader(v) && Number.isInteger(v.$snapshot) ? (v.$snapshot as number) : null;
  } catch {
    return null;
  } finally {
    await fh.close();
  }
}

function isHeader(v: unknown): v is { $log?: number; $snapshot?: number } {
  if (typeof v !== "object" || v === null) return false;
  const h = v as Record<string, unknown>;
  return Number.isInteger(h.$log) || Number.isInteger(h.$snapshot);
}

function closedError(name: string): SwitchboardError {
  return new SwitchboardError("UNAVAILABLE", `store is closed (journal ${name})`);
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
