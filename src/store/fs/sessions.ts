import { closeSync, openSync, readSync } from "node:fs";
import { InvalidParamsError } from "../../errors.js";
import { Journal, type LineAt, UNREADABLE } from "../../journal/index.js";
import type { Logger } from "../../log.js";
import { BoundedMap } from "../../ordered-set.js";
import { assertRecord, mergePatch, SESSION_IDENTITY, sessionProblem } from "../records.js";
import { KeyedSerial } from "../serial.js";
import type { ListSessionsQuery, SessionEntry, SessionKind, SessionPatch, SessionStore } from "../types.js";
import type { WarningSink } from "../warnings.js";
import { type IndexedSession, type IndexFields, SessionIndex, sessionIdHash } from "./session-index.js";
import { FALLBACK, scanSessionLine } from "./session-line.js";
import { readSidecar, type SnapshotFacts, type SnapshotLines, writeSidecar } from "./session-sidecar.js";

/**
 * One line of `sessions/index.jsonl` (and of its snapshot): a whole entry as stored, or
 * `{"del": key}`. Replay is last-writer-wins. In memory an entry is a SessionRef: its index
 * fields and where its line is; the whole entry is read back when it is returned.
 */
type SessionRecord = SessionRef | { del: string };

/** Entries kept parsed (the recently written and read ones): hot sessions skip the disk. */
const CACHED_ENTRIES = 4096;
/** Lines are read back in aligned blocks of this many bytes (neighbours come along). */
const BLOCK = 64 * 1024;

/**
 * A file entries are read back from: the snapshot or a log, by an fd opened when the file was
 * first met, so later renames (rotation) and the compaction's deletes do not matter. Reads are
 * synchronous (a page-cache hit is microseconds) and happen in the same step as the index
 * lookup that found the line, so a compaction never closes a file under a reader.
 */
class Segment {
  private block: Buffer | null = null;
  private blockStart = 0;
  private blockLen = 0;

  constructor(
    private readonly fd: number,
    /** The snapshot's S or the log's generation. */
    public gen: number,
    readonly snapshot: boolean,
  ) {}

  /** The line at `off` (`len` bytes); the buffer is valid until the next read. */
  read(off: number, len: number): Buffer {
    const inBlock = off - this.blockStart;
    if (this.block && inBlock >= 0 && inBlock + len <= this.blockLen) {
      return this.block.subarray(inBlock, inBlock + len);
    }
    const start = off - (off % BLOCK);
    if (off + len <= start + BLOCK) {
      this.block ??= Buffer.allocUnsafe(BLOCK);
      this.blockLen = 0;
      const n = readSync(this.fd, this.block, 0, BLOCK, start);
      this.blockStart = start;
      this.blockLen = n;
      if (off + len <= start + n) return this.block.subarray(off - start, off - start + len);
    }
    const buf = Buffer.allocUnsafe(len);
    let got = 0;
    while (got < len) {
      const n = readSync(this.fd, buf, got, len - got, off + got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  }

  /** Bytes from `off` on were (re)written: drop them from the block. */
  written(off: number): void {
    if (this.blockStart + this.blockLen > off) this.blockLen = 0;
  }

  close(): void {
    closeSync(this.fd);
  }
}

/**
 * An entry as the index holds it. Its index fields never change (a write makes a new ref); only
 * its location does, when a compaction moves its line into a new snapshot.
 */
interface SessionRef extends IndexedSession {
  seg: Segment;
  off: number;
  len: number;
}

/**
 * Every ref is made here, by one object literal, not a class: V8 allocates a literal's objects
 * straight in the old generation once it has seen most of them live long (allocation-site
 * pretenuring, which `new` does not get). At a million refs loaded in one go, copying them through
 * the young generation was about a quarter of the open.
 */
const sessionRef: (...ref: [...IndexFields, seg: Segment, off: number, len: number]) => SessionRef = (
  key,
  sid,
  agentId,
  updatedAt,
  archived,
  label,
  spawnedBy,
  displayName,
  seg,
  off,
  len,
) => ({ key, sid, agentId, updatedAt, archived, label, spawnedBy, displayName, seg, off, len });

function refOf(e: SessionEntry, seg: Segment, off: number, len: number): SessionRef {
  return sessionRef(
    e.key,
    sessionIdHash(e.sessionId),
    e.agentId,
    e.updatedAt,
    e.archivedAt !== undefined,
    e.label,
    e.spawnedBy,
    typeof e.displayName === "string" ? e.displayName : undefined,
    seg,
    off,
    len,
  );
}

/** A record read back is an entry's ref or a deletion (`{del}`: no segment). */
function isRef(r: SessionRecord | null | typeof UNREADABLE): r is SessionRef {
  return typeof r === "object" && r !== null && "seg" in r;
}

/** The open files entries point into. */
class Segments {
  private readonly all = new Set<Segment>();
  private readonly byFile = new Map<string, Segment>();
  private live: Segment | null = null;

  /** The segment of a file being loaded (opened on its first line). */
  atLoad(at: LineAt): Segment {
    let seg = this.byFile.get(at.file);
    if (!seg) {
      seg = new Segment(openSync(at.file, "r"), at.gen, at.snapshot);
      this.byFile.set(at.file, seg);
      this.all.add(seg);
    }
    return seg;
  }

  /** After loading: the live log's segment (if it had lines) belongs to generation `gen`. */
  loaded(livePath: string, gen: number): void {
    const seg = this.byFile.get(livePath);
    this.byFile.clear();
    if (!seg) return;
    seg.gen = gen; // the journal goes on appending to this file as generation `gen`
    this.live = seg;
  }

  /** The live log's segment for generation `gen` (opened when the generation starts). */
  liveFor(livePath: string, gen: number): Segment {
    if (this.live?.gen !== gen) {
      this.live = new Segment(openSync(livePath, "r"), gen, false);
      this.all.add(this.live);
    }
    return this.live;
  }

  /** A new snapshot `gen` is in place: returns its segment. */
  snapshot(file: string, gen: number): Segment {
    const seg = new Segment(openSync(file, "r"), gen, true);
    this.all.add(seg);
    return seg;
  }

  /** Closes what snapshot `gen` superseded (nothing points there any more). */
  superseded(keep: Segment): void {
    for (const seg of this.all) {
      if (seg === keep || (!seg.snapshot && seg.gen >= keep.gen)) continue;
      seg.close();
      this.all.delete(seg);
    }
  }

  closeAll(): void {
    for (const seg of this.all) seg.close();
    this.all.clear();
  }
}

export interface FsSessionStoreOptions {
  dir: string;
  logger: Logger;
  warnings: WarningSink;
  compactEveryAppends: number;
  classifyKind: (key: string) => SessionKind;
  now: () => number;
}

/**
 * Session entries: indexed in memory (SessionIndex of SessionRefs) and journaled to
 * `sessions/index.jsonl`; an entry's whole value is read back from its line when it is returned
 * (recent ones are kept parsed), so memory holds only what lookups and lists need. Every write
 * is serialised per key, reaches the file, and only then becomes visible to readers. Readers
 * get copies; stored entries are immutable.
 */
export class FsSessionStore implements SessionStore {
  private readonly serial = new KeyedSerial();
  private journal!: Journal<SessionRecord>;
  private readonly index: SessionIndex<SessionRef>;
  private readonly segments = new Segments();
  /** key → its parsed entry, for the ref it was parsed from; least recently used evicted first. */
  private readonly cache = new BoundedMap<string, { ref: SessionRef; entry: SessionEntry }>(CACHED_ENTRIES);
  /** The sidecar being written for the newest snapshot (session-sidecar.ts), and for which. */
  private sidecar: { gen: number; done: Promise<void> } | null = null;
  private closing = false;
  private loadedFrom: "none" | "sidecar" | "scan" = "none";
  /** The snapshot the open found (as the journal described it). */
  private snapshotSeen: SnapshotFacts | null = null;
  /** While a snapshot is scanned at open: its entries in order, for the sidecar it lacked. */
  private scanned: { file: string; gen: number; refs: SessionRef[]; clean: boolean } | null = null;

  private constructor(
    private readonly logger: Logger,
    private readonly warnings: WarningSink,
    private readonly now: () => number,
    classifyKind: (key: string) => SessionKind,
  ) {
    this.index = new SessionIndex<SessionRef>(classifyKind);
  }

  static async open(opts: FsSessionStoreOptions): Promise<FsSessionStore> {
    const store = new FsSessionStore(opts.logger, opts.warnings, opts.now, opts.classifyKind);
    const { index, segments } = store;
    try {
      store.journal = await Journal.open<SessionRecord>({
        dir: opts.dir,
        name: "index",
        logger: opts.logger,
        warnings: opts.warnings,
        compactEveryAppends: opts.compactEveryAppends,
        decode: () => null, // readLine decodes every record line
        readLine: (line, at) => {
          const r = readRecord(line, at, segments);
          if (at.snapshot) store.scannedLine(r, at);
          return r;
        },
        loadSnapshot: (snap) => store.loadSidecar(snap),
        replay: (r) => {
          if (isRef(r)) index.set(r);
          else index.remove(r.del);
        },
        snapshot: () => index.entries(),
        serialize: (r) => (isRef(r) ? r.seg.read(r.off, r.len).toString("utf8") : JSON.stringify(r)),
        snapshotWritten: (w) => {
          store.repoint(w.file, w.gen, w.records, w.offsets);
          const n = w.records.length;
          if (!w.records.every((r) => isRef(r))) return;
          const offsets = w.offsets;
          store.startSidecar(
            { file: w.file, gen: w.gen, bytes: offsets[n]! },
            {
              refs: w.records as SessionRef[],
              first: offsets[0]!,
              length: (i) => offsets[i + 1]! - offsets[i]! - 1,
            },
          );
        },
        size: () => index.size,
        locate: true,
      });
    } catch (err) {
      segments.closeAll();
      throw err;
    }
    segments.loaded(store.journal.livePath, store.journal.generation);
    index.build();
    const scan = store.scanned;
    store.scanned = null;
    // a snapshot had to be scanned (written before sidecars, or its sidecar unfit): give the next open one
    const seen = store.snapshotSeen;
    if (scan?.clean && scan.file === seen?.file && scan.gen === seen.gen) {
      const { refs } = scan;
      const last = refs.at(-1)!;
      if (last.off + last.len + 1 === seen.bytes) {
        // lengths read now: a compaction re-points refs, but also stops this write before its next block
        const lengths = Uint32Array.from(refs, (r) => r.len);
        store.startSidecar(seen, { refs, first: refs[0]!.off, length: (i) => lengths[i]! });
      }
    }
    return store;
  }

  /**
   * Starts the work the open left for later (the lookups by sessionId, label and spawnedBy),
   * in slices between requests; anything that needs it first finishes it at once.
   */
  startBackgroundWork(): void {
    this.index.buildLookupsInBackground();
  }

  /**
   * How the open loaded the snapshot's entries: from its sidecar, by scanning its lines (no
   * sidecar fit for it), or "none" (no snapshot yet). For doctor and tests.
   */
  get snapshotLoad(): "none" | "sidecar" | "scan" {
    return this.loadedFrom;
  }

  /** Path of the live index log (for doctor and tests). */
  get indexPath(): string {
    return this.journal.livePath;
  }

  async get(key: string): Promise<SessionEntry | null> {
    const e = this.current(key);
    return e ? cloneEntry(e) : null;
  }

  async put(entry: SessionEntry): Promise<void> {
    const stored = normalizeEntry(entry, "entry");
    return this.serial.run(stored.entry.key, () => this.write(stored));
  }

  update(
    key: string,
    fn: (current: SessionEntry | null) => SessionEntry | null,
  ): Promise<SessionEntry | null> {
    return this.serial.run(key, async () => {
      const cur = this.current(key);
      const next = fn(cur ? cloneEntry(cur) : null);
      if (next === null) return cur ? cloneEntry(cur) : null;
      const stored = normalizeEntry(next, "update result");
      if (stored.entry.key !== key) {
        throw new InvalidParamsError(`update result.key: must stay "${key}" (got "${stored.entry.key}")`, {
          field: "key",
        });
      }
      await this.write(stored);
      return cloneEntry(stored.entry);
    });
  }

  patch(key: string, patch: SessionPatch): Promise<SessionEntry | null> {
    return this.serial.run(key, async () => {
      const cur = this.current(key);
      if (!cur) return null;
      const merged = mergePatch(cur, patch, SESSION_IDENTITY);
      assertRecord(sessionProblem(merged), "patch");
      const stored: NormalizedEntry = {
        entry: merged as unknown as SessionEntry,
        json: JSON.stringify(merged),
      };
      await this.write(stored);
      return cloneEntry(stored.entry);
    });
  }

  delete(key: string): Promise<boolean> {
    return this.serial.run(key, async () => {
      if (!this.index.get(key)) return false;
      await this.journal.append({ del: key }, () => {
        this.index.remove(key);
        this.cache.delete(key);
      });
      return true;
    });
  }

  async getBySessionId(sessionId: string): Promise<SessionEntry | null> {
    const refs = this.index.candidatesBySessionId(sessionId);
    for (let i = refs.length - 1; i >= 0; i--) {
      const e = this.entryOf(refs[i]!);
      if (e?.sessionId === sessionId) return cloneEntry(e);
    }
    return null;
  }

  async list(query: ListSessionsQuery): Promise<SessionEntry[]> {
    return this.entriesOf(this.index.list(query, this.now()));
  }

  async findByLabel(label: string, agentId?: string): Promise<SessionEntry[]> {
    return this.entriesOf(this.index.findByLabel(label, agentId));
  }

  async count(): Promise<number> {
    return this.index.size;
  }

  /** Writes a snapshot of the index now (normally done in the background), and then its sidecar. */
  async compact(): Promise<void> {
    await this.journal.compact();
    await this.sidecar?.done;
  }

  async close(): Promise<void> {
    await this.serial.drain();
    this.closing = true;
    await this.sidecar?.done;
    await this.journal.close();
    this.segments.closeAll();
    this.cache.clear();
  }

  private write({ entry, json }: NormalizedEntry): Promise<void> {
    const len = Buffer.byteLength(json);
    return this.journal.appendJson(json, (offset) => {
      const seg = this.segments.liveFor(this.journal.livePath, this.journal.generation);
      seg.written(offset);
      const ref = refOf(entry, seg, offset, len);
      this.index.set(ref);
      this.remember(ref, entry);
    });
  }

  /** The stored entry of `key` (not a copy), or null. */
  private current(key: string): SessionEntry | null {
    const ref = this.index.get(key);
    return ref ? this.entryOf(ref) : null;
  }

  private entriesOf(refs: readonly SessionRef[]): SessionEntry[] {
    const out: SessionEntry[] = [];
    for (const ref of refs) {
      const e = this.entryOf(ref);
      if (e) out.push(cloneEntry(e));
    }
    return out;
  }

  /** The whole entry of a ref: from the cache, else parsed from its line (null if that is damaged). */
  private entryOf(ref: SessionRef): SessionEntry | null {
    const hit = this.cache.get(ref.key);
    if (hit !== undefined && hit.ref === ref) {
      this.cache.touch(ref.key);
      return hit.entry;
    }
    let entry: SessionEntry | null = null;
    try {
      const v = JSON.parse(ref.seg.read(ref.off, ref.len).toString("utf8")) as SessionEntry;
      if (v !== null && typeof v === "object" && v.key === ref.key) entry = v;
    } catch {
      // damaged after its index fields were read (the start-up scan skips nested values)
    }
    if (!entry) {
      this.warnings.add(`${this.journal.livePath}: entry "${ref.key}" unreadable on disk; left out`, {
        key: ref.key,
      });
      return null;
    }
    this.remember(ref, entry);
    return entry;
  }

  private remember(ref: SessionRef, entry: SessionEntry): void {
    this.cache.set(ref.key, { ref, entry });
  }

  /**
   * Loads the snapshot's entries from its sidecar (index fields as columns, no JSON to scan);
   * false when there is none fit for this snapshot, and the journal scans its lines instead.
   */
  private async loadSidecar(snap: SnapshotFacts): Promise<boolean> {
    this.snapshotSeen = snap;
    const seg = this.segments.atLoad({
      file: snap.file,
      gen: snap.gen,
      snapshot: true,
      offset: 0,
      length: 0,
    });
    const index = this.index;
    const got = await readSidecar(
      snap,
      (key, sid, agentId, updatedAt, archived, label, spawnedBy, name, off, len) => {
        index.set(sessionRef(key, sid, agentId, updatedAt, archived, label, spawnedBy, name, seg, off, len));
      },
      (entries) => index.reserve(entries),
    );
    this.loadedFrom = typeof got === "number" ? "sidecar" : "scan";
    if (typeof got === "number") return true;
    index.clearLoaded(); // the snapshot loads first, into an empty index: drop what a bad sidecar gave
    this.logger.info(
      { file: snap.file, reason: got },
      "session index sidecar not used: scanning the snapshot",
    );
    return false;
  }

  /**
   * Notes a snapshot line read by the scan. A sidecar describes every line, contiguously: one
   * that is not a valid entry (or a deletion, which a snapshot never holds) means none.
   */
  private scannedLine(r: SessionRecord | null | typeof UNREADABLE, at: LineAt): void {
    let scan = this.scanned;
    if (scan?.file !== at.file) {
      // the snapshot's first record line
      scan = this.scanned = { file: at.file, gen: at.gen, refs: [], clean: true };
    }
    if (!scan.clean) return;
    const prev = scan.refs.at(-1);
    if (!isRef(r) || (prev !== undefined && prev.off + prev.len + 1 !== at.offset)) {
      scan.clean = false;
      scan.refs = [];
      return;
    }
    scan.refs.push(r);
  }

  /**
   * Writes the sidecar of the snapshot just put in place, in the background (one at a time: a
   * newer snapshot stops an older sidecar's write). A failure only costs the next open its speed.
   */
  private startSidecar(snap: SnapshotFacts, lines: SnapshotLines): void {
    const { file, gen } = snap;
    const before = this.sidecar?.done ?? Promise.resolve();
    const stop = () => this.closing || this.sidecar?.gen !== gen;
    const done = before
      .then(() => (stop() ? false : writeSidecar(snap, lines, stop)))
      .then(
        (written) => {
          if (!written && !stop())
            this.logger.info({ file }, "session index sidecar not written (a string holds NUL)");
        },
        (err: unknown) => this.logger.warn({ err, file }, "session index sidecar not written"),
      );
    this.sidecar = { gen, done };
  }

  /** A snapshot is in place: entries unchanged since its rotation now point into it. */
  private repoint(file: string, gen: number, records: SessionRecord[], offsets: number[]): void {
    const seg = this.segments.snapshot(file, gen);
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      if (!isRef(r) || this.index.get(r.key) !== r) continue;
      r.seg = seg;
      r.off = offsets[i]!;
      r.len = offsets[i + 1]! - offsets[i]! - 1;
    }
    this.segments.superseded(seg);
  }
}

/** Reads one line at load: the index fields by a scan, or the whole record when the scan is unsure. */
function readRecord(line: Buffer, at: LineAt, segments: Segments): SessionRecord | null | typeof UNREADABLE {
  const seg = segments.atLoad(at);
  const r = scanSessionLine(line);
  if (r !== FALLBACK) {
    if ("del" in r) return r;
    return sessionRef(
      r.key,
      r.sid,
      r.agentId,
      r.updatedAt,
      r.archived,
      r.label,
      r.spawnedBy,
      r.displayName,
      seg,
      at.offset,
      at.length,
    );
  }
  let v: unknown;
  try {
    v = JSON.parse(line.toString("utf8"));
  } catch {
    return UNREADABLE;
  }
  const rec = decodeRecord(v);
  if (rec === null || "del" in rec) return rec;
  return refOf(rec, seg, at.offset, at.length);
}

interface NormalizedEntry {
  entry: SessionEntry;
  /** Its JSON text: the journal line. */
  json: string;
}

/** A private, JSON-clean copy (undefined fields dropped, as a reload would), after checking the basics. */
function normalizeEntry(entry: SessionEntry, what: string): NormalizedEntry {
  assertRecord(sessionProblem(entry), what);
  const json = JSON.stringify(entry);
  return { entry: JSON.parse(json) as SessionEntry, json };
}

function decodeRecord(v: unknown): SessionEntry | { del: string } | null {
  if (typeof v !== "object" || v === null) return null;
  const r = v as Record<string, unknown>;
  if (typeof r.del === "string" && r.key === undefined) return { del: r.del };
  return sessionProblem(r) === null ? (r as unknown as SessionEntry) : null;
}

/** Copies down to the nested objects SessionEntry declares (their members are primitives). */
function cloneEntry(e: SessionEntry): SessionEntry {
  const c = { ...e };
  if (e.deliveryContext) c.deliveryContext = { ...e.deliveryContext };
  if (e.subagent) c.subagent = { ...e.subagent };
  if (e.threadBinding) c.threadBinding = { ...e.threadBinding };
  return c;
}
