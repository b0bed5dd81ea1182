import { fstatSync, ftruncateSync } from "node:fs";
import { type FileHandle, open, rename } from "node:fs/promises";
import path from "node:path";
import { DEFAULT_TAIL_CACHE_CHARS } from "../../config/schema.js";
import { InvalidParamsError, SwitchboardError } from "../../errors.js";
import { storageError } from "../../journal/append.js";
import { BoundedMap } from "../../ordered-set.js";
import { KeyedSerial } from "../serial.js";
import { cloneJson, TailCache, type TailCacheLimits, tailCacheStats } from "../tail-cache.js";
import type {
  ReadTailOptions,
  TailCacheStats,
  TranscriptMessage,
  TranscriptRef,
  TranscriptStore,
} from "../types.js";
import type { WarningSink } from "../warnings.js";
import { appendSync, assertSafeSegment, ensureDir, FILE_MODE, fileSize, isErrno, layout } from "./paths.js";
import { type PositionalRead, scanBackwards } from "./tail.js";

const ROLES = new Set(["user", "assistant", "toolCall", "toolResult", "system", "compaction"]);
const TOOL_ROLES = new Set(["toolCall", "toolResult"]);
const CLOSE_BRACE = 0x7d;
const NL = 0x0a;

interface OpenTranscript {
  /** Opened "a+": appends go to the end (written synchronously on `fh.fd`), positional reads work. */
  fh: FileHandle;
  /** The file does not end with a newline (torn write): the next append starts a fresh line. */
  needsNewline: boolean;
  /** File size as far as our own appends tell; -1 after a failed write (ask the file). */
  size: number;
}

export interface FsTranscriptStoreOptions {
  stateDir: string;
  warnings: WarningSink;
  now: () => number;
  /** Append handles kept open (least recently used are closed). Default 1,024. */
  maxOpenFiles?: number;
  /** Per-transcript message counts kept in memory. Default 50,000. */
  maxCachedCounts?: number;
  /** Bounds of the in-memory tail cache (see tail-cache.ts); `maxChars: 0` turns it off. */
  tailCache?: Partial<TailCacheLimits>;
}

/** Default bound of a head read (titles from the first messages). */
const HEAD_MAX_BYTES = 64 * 1024;

/** How many of a transcript's newest lines the duplicate-id check of `append` looks at. */
const ID_CHECK_LINES = 512;

/** Enough lines for the runtime's window (400) and a crash re-run's id check (512). */
const DEFAULT_TAIL_CACHE: TailCacheLimits = {
  maxLinesPerFile: 512,
  maxCharsPerFile: 256 * 1024,
  maxChars: DEFAULT_TAIL_CACHE_CHARS,
};

/**
 * Transcripts as JSONL files (API.md §6), one per sessionId. Every operation on one file runs
 * through a per-file queue, so appends keep call order and never interleave, and reads see
 * only whole appends. Tails are read backwards from the end of the file; counts are computed
 * once per file (a scan) and then kept up to date by appends.
 *
 * Hot path (a turn appends and re-reads its window on every model step): append handles stay
 * open (LRU), appends are one synchronous write(2) each (see `appendSync`), a tail read
 * reuses the open handle (positional reads work on "a+") and the size our appends tracked,
 * and the newest messages of recently used files are kept in a `TailCache`, so a window read
 * usually costs no system call at all. Folders are created lazily: `open` is tried first and
 * the folder made only when it is missing.
 */
export class FsTranscriptStore implements TranscriptStore {
  private readonly serial = new KeyedSerial();
  private readonly handles = new Map<string, OpenTranscript>();
  /** Each agent's transcript folder (`layout.transcriptDir`). */
  private readonly agentDirs = new Map<string, string>();
  /** Message counts by file, the least recently counted or appended to evicted first. */
  private readonly counts: BoundedMap<string, number>;
  private readonly maxOpenFiles: number;
  private readonly tails: TailCache | null;
  private tailBytesRead = 0;
  private countBytesRead = 0;
  private closed = false;

  constructor(private readonly opts: FsTranscriptStoreOptions) {
    this.maxOpenFiles = opts.maxOpenFiles ?? 1024;
    this.counts = new BoundedMap(opts.maxCachedCounts ?? 50_000);
    const t = opts.tailCache;
    const limits: TailCacheLimits = {
      maxLinesPerFile: t?.maxLinesPerFile ?? DEFAULT_TAIL_CACHE.maxLinesPerFile,
      maxCharsPerFile: t?.maxCharsPerFile ?? DEFAULT_TAIL_CACHE.maxCharsPerFile,
      maxChars: t?.maxChars ?? DEFAULT_TAIL_CACHE.maxChars,
    };
    this.tails = limits.maxChars > 0 && limits.maxLinesPerFile > 0 ? new TailCache(limits) : null;
  }

  locate(ref: TranscriptRef): string {
    assertSafeSegment("agentId", ref.agentId);
    assertSafeSegment("sessionId", ref.sessionId);
    // safe segments join as they are: only the agent's folder needs path.join (once per agent)
    let dir = this.agentDirs.get(ref.agentId);
    if (dir === undefined) {
      dir = layout.transcriptDir(this.opts.stateDir, ref.agentId);
      if (this.agentDirs.size < 1024) this.agentDirs.set(ref.agentId, dir);
    }
    return `${dir}${path.sep}${ref.sessionId}.jsonl`;
  }

  async append(ref: TranscriptRef, message: TranscriptMessage): Promise<boolean> {
    this.assertOpen();
    const file = this.locate(ref);
    checkMessage(message);
    const json = JSON.stringify(message);
    const line = `${json}\n`;
    return this.serial.run(file, async () => {
      this.assertOpen();
      const t = await this.handle(file);
      if (await this.hasRecentId(file, message.id)) return false;
      const text = t.needsNewline ? `\n${line}` : line;
      try {
        const written = appendSync(t.fh.fd, text);
        t.needsNewline = false;
        if (t.size >= 0) t.size += written;
      } catch (err) {
        // part of the line may be in the file: cut it back off (the shared journal rule), or
        // at least start the next append on a fresh line
        let cut = false;
        if (t.size >= 0) {
          try {
            ftruncateSync(t.fh.fd, t.size);
            cut = true;
          } catch {
            // still dirty
          }
        }
        if (!cut) {
          t.needsNewline = true;
          t.size = -1;
        }
        this.tails?.delete(file);
        throw storageError(err, `transcript ${ref.sessionId}`);
      }
      this.tails?.append(file, JSON.parse(json) as TranscriptMessage, json.length);
      const c = this.counts.get(file);
      if (c !== undefined) this.counts.set(file, c + 1);
      return true;
    });
  }

  /**
   * Whether one of the newest messages of `file` has this id (API.md §6: appending an existing
   * id is a no-op). The ids that matter are those of the run being re-run after a crash, which
   * are the newest lines: the tail cache holds them (up to `ID_CHECK_LINES`); a cold file is
   * read from its end once, which also fills the cache. Must run inside the file's queue.
   */
  private async hasRecentId(file: string, id: string): Promise<boolean> {
    if (this.tails) {
      const hit = this.tails.hasId(file, id);
      if (hit !== null) return hit;
      // read-only (shared): only the ids are looked at, so the messages are not copied
      await this.readTailFromFile(file, ID_CHECK_LINES, true, true);
      const again = this.tails.hasId(file, id);
      if (again !== null) return again;
    }
    // no cache (turned off, or the tail did not fit): look at the file's newest lines
    const recent = await this.readTailFromFile(file, ID_CHECK_LINES, true, true);
    return recent.some((m) => m.id === id);
  }

  async readTail(ref: TranscriptRef, opts: ReadTailOptions): Promise<TranscriptMessage[]> {
    const file = this.locate(ref);
    const limit = Math.floor(opts.limit);
    if (!(limit > 0)) return [];
    const includeTools = opts.includeTools === true;
    return this.serial.run(file, async () => {
      const cached = this.tails?.read(file, limit, includeTools, opts.readOnly === true);
      if (cached) return cached;
      return this.readTailFromFile(file, limit, includeTools, opts.readOnly === true);
    });
  }

  async count(ref: TranscriptRef): Promise<number> {
    const file = this.locate(ref);
    return this.serial.run(file, async () => {
      const cached = this.counts.get(file);
      if (cached !== undefined) return cached;
      const n = await this.countLines(file);
      this.counts.set(file, n);
      return n;
    });
  }

  /** Renames `<sessionId>.jsonl` to `<sessionId>.jsonl.<reason>.<ISO time>`; null when there is none. */
  archivedLocation(ref: TranscriptRef, reason: "archived" | "deleted", at: number): string {
    return `${this.locate(ref)}.${reason}.${new Date(at).toISOString().replace(/:/g, "-")}`;
  }

  async archive(
    ref: TranscriptRef,
    reason: "archived" | "deleted",
    opts: { at?: number } = {},
  ): Promise<string | null> {
    this.assertOpen();
    const file = this.locate(ref);
    return this.serial.run(file, async () => {
      await this.closeHandle(file); // an open append handle would follow the renamed file
      this.counts.delete(file);
      this.tails?.delete(file);
      if ((await fileSize(file)) < 0) return null;
      const first = this.archivedLocation(ref, reason, opts.at ?? this.opts.now());
      let target = first;
      for (let i = 1; (await fileSize(target)) >= 0; i++) target = `${first}-${i}`;
      await rename(file, target);
      return target;
    });
  }

  async readHead(
    ref: TranscriptRef,
    opts: { limit: number; maxBytes?: number },
  ): Promise<TranscriptMessage[]> {
    this.assertOpen();
    const file = this.locate(ref);
    const limit = Math.floor(opts.limit);
    if (!(limit > 0)) return [];
    const maxBytes = Math.max(1, Math.floor(opts.maxBytes ?? HEAD_MAX_BYTES));
    return this.serial.run(file, async () => {
      let fh: FileHandle;
      try {
        fh = await open(file, "r");
      } catch (err) {
        if (isErrno(err, "ENOENT")) return [];
        throw err;
      }
      try {
        const buf = Buffer.alloc(maxBytes);
        const { bytesRead } = await fh.read(buf, 0, maxBytes, 0);
        const out: TranscriptMessage[] = [];
        let start = 0;
        // Only whole lines: a line cut by the byte bound is not read.
        for (let nl = buf.indexOf(NL, 0); nl !== -1 && nl < bytesRead; nl = buf.indexOf(NL, start)) {
          const text = buf.toString("utf8", start, nl).trim();
          if (text !== "") {
            try {
              const v: unknown = JSON.parse(text);
              if (isMessage(v)) out.push(v);
            } catch {
              // skipped; tail reads report unreadable lines
            }
          }
          start = nl + 1;
          if (out.length >= limit) break;
        }
        return out;
      } finally {
        await fh.close();
      }
    });
  }

  warnings(): string[] {
    return this.opts.warnings.all();
  }

  /** Bytes read so far by tail reads and by count scans (lets tests prove tails stay small). */
  readStats(): { tailBytesRead: number; countBytesRead: number } {
    return { tailBytesRead: this.tailBytesRead, countBytesRead: this.countBytesRead };
  }

  cacheStats(): TailCacheStats {
    return tailCacheStats(this.tails);
  }

  /** Waits for queued operations, then closes every file. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await this.serial.drain();
    this.tails?.clear();
    const open = [...this.handles.values()];
    this.handles.clear();
    await Promise.all(open.map((t) => t.fh.close()));
  }

  // ---------------------------------------------------------------- internals

  private assertOpen(): void {
    if (this.closed) throw new SwitchboardError("UNAVAILABLE", "store is closed (transcripts)");
  }

  /**
   * Scans backwards from the end; remembers every valid line it passed in the tail cache (a
   * suffix of the file, complete when the scan reached the start). Must run inside the file's queue.
   */
  /** `shared`: hand out the objects the tail cache keeps (a read-only caller), not copies. */
  private async readTailFromFile(
    file: string,
    limit: number,
    includeTools: boolean,
    shared = false,
  ): Promise<TranscriptMessage[]> {
    const cached = this.handles.get(file);
    let fh: FileHandle | null = null;
    if (!cached) {
      try {
        fh = await open(file, "r");
      } catch (err) {
        if (isErrno(err, "ENOENT")) return [];
        throw err;
      }
    }
    const from = cached?.fh ?? fh!;
    const readAt: PositionalRead = async (buf, off, len, pos) =>
      (await from.read(buf, off, len, pos)).bytesRead;
    const out: TranscriptMessage[] = [];
    const seen: TranscriptMessage[] = [];
    const seenSizes: number[] = [];
    let complete = true;
    try {
      const size = cached && cached.size >= 0 ? cached.size : fstatSync(from.fd).size;
      this.tailBytesRead += await scanBackwards(readAt, size, (buf, info) => {
        const text = buf.toString("utf8");
        const msg = this.parseLine(file, text, info.offset, info.terminated);
        if (!msg) return false;
        if (this.tails) {
          seen.push(msg);
          seenSizes.push(text.length);
        }
        if (includeTools || !TOOL_ROLES.has(msg.role)) out.push(this.tails && !shared ? cloneJson(msg) : msg);
        if (out.length < limit) return false;
        complete = false; // stopped early: older lines may exist
        return true;
      });
    } finally {
      await fh?.close();
    }
    if (this.tails && seen.length > 0) this.tails.set(file, seen.reverse(), seenSizes.reverse(), complete);
    return out.reverse();
  }

  /**
   * The open append handle of `file` (opened "a+" on first use; the least recently used one
   * is closed beyond `maxOpenFiles`). Opening stays asynchronous: creating a file can wait on
   * the disk (~0.8 ms per new file on the bench VM), which must not stall the event loop.
   * Must run inside the file's queue.
   */
  private async handle(file: string): Promise<OpenTranscript> {
    const cached = this.handles.get(file);
    if (cached) {
      this.handles.delete(file); // re-insert: the map's order is least recently used first
      this.handles.set(file, cached);
      return cached;
    }
    let fh: FileHandle;
    try {
      fh = await open(file, "a+", FILE_MODE);
    } catch (err) {
      if (!isErrno(err, "ENOENT")) throw err;
      await ensureDir(path.dirname(file)); // only the first transcript of an agent gets here
      fh = await open(file, "a+", FILE_MODE);
    }
    let t: OpenTranscript;
    try {
      const { size } = fstatSync(fh.fd);
      let needsNewline = false;
      if (size > 0) {
        const last = Buffer.alloc(1);
        await fh.read(last, 0, 1, size - 1);
        needsNewline = last[0] !== NL;
      } else {
        this.tails?.setEmpty(file); // a new (or empty) transcript: the cache knows all of it
      }
      t = { fh, needsNewline, size };
    } catch (err) {
      await fh.close();
      throw err;
    }
    this.handles.set(file, t);
    if (this.handles.size > this.maxOpenFiles) {
      const [victim] = this.handles.keys();
      if (victim !== undefined && victim !== file) {
        const v = this.handles.get(victim)!;
        this.handles.delete(victim);
        // queued behind whatever that file is doing right now (a tail read may use the handle)
        void this.serial.run(victim, () => v.fh.close()).catch(() => {});
      }
    }
    return t;
  }

  private async closeHandle(file: string): Promise<void> {
    const t = this.handles.get(file);
    if (!t) return;
    this.handles.delete(file);
    await t.fh.close();
  }

  /** A valid message, or null (the line is reported once and skipped). */
  private parseLine(
    file: string,
    text: string,
    offset: number,
    terminated: boolean,
  ): TranscriptMessage | null {
    try {
      const v: unknown = JSON.parse(text);
      if (isMessage(v)) return v;
    } catch {
      // reported below
    }
    const what = terminated ? "unreadable line" : "torn last line (no trailing newline)";
    this.opts.warnings.add(`${file}: ${what} at byte ${offset} skipped`, { file, offset });
    return null;
  }

  /**
   * Counts lines that look like whole JSON objects (end with `}`), so a torn line is not
   * counted. A scan of the file without allocating per line, done once per file and then
   * maintained by appends.
   */
  private async countLines(file: string): Promise<number> {
    let fh: FileHandle;
    try {
      fh = await open(file, "r");
    } catch (err) {
      if (isErrno(err, "ENOENT")) return 0;
      throw err;
    }
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      let n = 0;
      let pos = 0;
      let prev = NL; // last byte of the previous chunk
      for (;;) {
        const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
        if (bytesRead === 0) break;
        pos += bytesRead;
        for (let nl = buf.indexOf(NL); nl !== -1 && nl < bytesRead; nl = buf.indexOf(NL, nl + 1)) {
          if ((nl === 0 ? prev : buf[nl - 1]) === CLOSE_BRACE) n++;
        }
        prev = buf[bytesRead - 1]!;
      }
      if (prev === CLOSE_BRACE) n++; // a last line without a newline that is still whole
      this.countBytesRead += pos;
      return n;
    } finally {
      await fh.close();
    }
  }
}

function isMessage(v: unknown): v is TranscriptMessage {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const m = v as Record<string, unknown>;
  return typeof m.id === "string" && typeof m.role === "string" && ROLES.has(m.role);
}

function checkMessage(m: TranscriptMessage): void {
  if (typeof m !== "object" || m === null) throw new InvalidParamsError("message: must be an object");
  if (typeof m.id !== "string" || m.id.length === 0) {
    throw new InvalidParamsError("message.id: must be a non-empty string", { field: "id" });
  }
  if (!ROLES.has(m.role)) {
    throw new InvalidParamsError(`message.role: must be one of ${[...ROLES].join(", ")}`, { field: "role" });
  }
}
