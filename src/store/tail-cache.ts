/**
 * The newest messages of recently used transcripts, so the runtime's window read (every model
 * step) and history reads are served without touching the disk.
 *
 * An entry is a suffix of the file's valid messages, in file order: exactly what a backwards
 * scan would parse (torn or unreadable lines are never in it). `complete` says the suffix
 * starts at the first message of the file, so a read wanting more than is cached is still
 * served. The owner keeps entries true and only touches an entry from inside that transcript's
 * queue: FsTranscriptStore (the only writer of its files) extends them after every successful
 * append and drops them when an append fails or a file is archived; RedisTranscriptStore (many
 * processes append) extends them on read with what the stream gained since, checked against the
 * stream's length kept in the entry's `meta`.
 *
 * Messages are kept parsed (as `JSON.parse` of their line returned them) and never handed
 * out: a read gets deep copies (`cloneJson`, ~15× cheaper than parsing the line again), so
 * callers may mutate what they get; a read-only caller (`shared`) gets the cached objects.
 *
 * Bounded three ways: messages per file, characters of JSON per file, characters of JSON
 * overall. Over the overall bound a file from the older half of the use order is dropped, picked
 * at random: strict least-recently-used would, with more busy sessions than fit used in turn,
 * always drop the very file needed next (every read a miss, each rereading its window from
 * disk); the random pick keeps a share of them, and recently used files are never the victim.
 */
import type { Provenance, TailCacheStats, TranscriptMessage } from "./types.js";

const TOOL_ROLES: ReadonlySet<string> = new Set(["toolCall", "toolResult"]);

/** The newest `limit` messages that are not tool calls or results, oldest first. */
function newestChat(msgs: readonly TranscriptMessage[], limit: number): TranscriptMessage[] {
  const picked: TranscriptMessage[] = [];
  for (let i = msgs.length - 1; i >= 0 && picked.length < limit; i--) {
    if (!TOOL_ROLES.has(msgs[i]!.role)) picked.push(msgs[i]!);
  }
  return picked.reverse();
}

/** A cache's use; all zero when the owner runs without one (turned off). */
export function tailCacheStats(cache: TailCache<unknown> | null): TailCacheStats {
  return cache?.stats() ?? { files: 0, chars: 0, maxChars: 0, hits: 0, misses: 0, fills: 0 };
}

export interface TailCacheLimits {
  /** Messages kept per file (oldest dropped first). */
  maxLinesPerFile: number;
  /** Characters of JSON kept per file (oldest messages dropped first). */
  maxCharsPerFile: number;
  /** Characters of JSON kept over all files (least recently used files dropped first). */
  maxChars: number;
}

interface Entry<M> {
  msgs: TranscriptMessage[];
  /** Parallel to `msgs`: length of each message's JSON line. */
  sizes: number[];
  chars: number;
  /** `msgs` starts at the file's first message. */
  complete: boolean;
  /** How many of `msgs` carry each id: built on the first `hasId`, then kept in step. */
  ids: Map<string, number> | null;
  /** What the owner needs to keep the entry true (the redis store: stream position and length). */
  meta: M | undefined;
  /** The newest provenance in `msgs`: the next equal one points at it (`shareValues`). */
  provenance: Provenance | undefined;
}

export class TailCache<M = undefined> {
  /** Map order is least recently used first. */
  private readonly entries = new Map<string, Entry<M>>();
  private chars = 0;
  private hits = 0;
  private misses = 0;
  private fills = 0;

  constructor(
    private readonly limits: TailCacheLimits,
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * Copies of the newest `limit` messages passing the filter, oldest first, or null when the
   * entry cannot tell (absent, or it holds fewer matching messages than asked and is not complete).
   * `shared`: the cached objects themselves (in a new array), for a caller that never mutates them.
   */
  read(file: string, limit: number, includeTools: boolean, shared = false): TranscriptMessage[] | null {
    const e = this.entries.get(file);
    if (!e) {
      this.misses++;
      return null;
    }
    // oldest first; with tool messages included every message passes: the entry's end as it is
    const picked = includeTools
      ? e.msgs.slice(Math.max(0, e.msgs.length - limit))
      : newestChat(e.msgs, limit);
    if (picked.length < limit && !e.complete) {
      this.misses++;
      return null;
    }
    this.hits++;
    this.touch(file, e);
    if (!shared) for (let i = 0; i < picked.length; i++) picked[i] = cloneJson(picked[i]!);
    return picked;
  }

  /**
   * Whether the cached tail of `file` holds a message with this id: true/false when the entry
   * can tell (it holds the id, or it is the whole file), null when there is no entry. An
   * incomplete entry answers for the messages it holds (the newest ones) and false beyond them.
   */
  hasId(file: string, id: string): boolean | null {
    const e = this.entries.get(file);
    if (!e) return null;
    if (!e.ids) {
      e.ids = new Map();
      for (const m of e.msgs) countId(e.ids, m.id, 1);
    }
    return e.ids.has(id);
  }

  /**
   * Replaces the entry with messages just parsed from the file (oldest first; the cache owns
   * them from now on) and the lengths of their lines.
   */
  set(file: string, msgs: TranscriptMessage[], sizes: number[], complete: boolean, meta?: M): void {
    this.delete(file);
    if (msgs.length > 0) this.fills++;
    const e: Entry<M> = { msgs, sizes, chars: 0, complete, ids: null, meta, provenance: undefined };
    for (let i = 0; i < msgs.length; i++) shareValues(e, msgs[i - 1], msgs[i]!);
    for (const n of sizes) e.chars += n;
    this.entries.set(file, e);
    this.chars += e.chars;
    this.trim(file, e);
  }

  /** Starts an entry for a file known to hold no messages. */
  setEmpty(file: string): void {
    this.set(file, [], [], true);
  }

  /**
   * Records an appended message (a private copy: the cache owns it) and the length of its
   * line; a no-op when the file has no entry.
   */
  append(file: string, msg: TranscriptMessage, size: number): void {
    const e = this.entries.get(file);
    if (!e) return;
    shareValues(e, e.msgs[e.msgs.length - 1], msg);
    e.msgs.push(msg);
    e.sizes.push(size);
    if (e.ids) countId(e.ids, msg.id, 1);
    e.chars += size;
    this.chars += size;
    this.touch(file, e);
    this.trim(file, e);
  }

  delete(file: string): void {
    const e = this.entries.get(file);
    if (!e) return;
    this.entries.delete(file);
    this.chars -= e.chars;
  }

  clear(): void {
    this.entries.clear();
    this.chars = 0;
  }

  stats(): TailCacheStats {
    return {
      files: this.entries.size,
      chars: this.chars,
      maxChars: this.limits.maxChars,
      hits: this.hits,
      misses: this.misses,
      fills: this.fills,
    };
  }

  /** The owner's meta of `file`'s entry; undefined when there is no entry. */
  meta(file: string): M | undefined {
    return this.entries.get(file)?.meta;
  }

  private touch(file: string, e: Entry<M>): void {
    this.entries.delete(file);
    this.entries.set(file, e);
  }

  private trim(file: string, e: Entry<M>): void {
    const { maxLinesPerFile, maxCharsPerFile, maxChars } = this.limits;
    let drop = 0;
    let dropped = 0;
    while (
      drop < e.msgs.length &&
      (e.msgs.length - drop > maxLinesPerFile || e.chars - dropped > maxCharsPerFile)
    ) {
      dropped += e.sizes[drop]!;
      drop++;
    }
    if (drop > 0) {
      if (e.ids) for (let i = 0; i < drop; i++) countId(e.ids, e.msgs[i]!.id, -1);
      e.msgs.splice(0, drop);
      e.sizes.splice(0, drop);
      e.chars -= dropped;
      this.chars -= dropped;
      e.complete = false;
      // nothing left that could answer a read
      if (e.msgs.length === 0) this.delete(file);
    }
    while (this.chars > maxChars && this.entries.size > 1) {
      const victim = this.pickVictim(file);
      if (victim === undefined) break;
      const v = this.entries.get(victim)!;
      this.entries.delete(victim);
      this.chars -= v.chars;
    }
  }

  /** A random file from the older half of the use order, never `keep`. */
  private pickVictim(keep: string): string | undefined {
    const half = Math.max(1, Math.floor((this.entries.size - 1) / 2));
    let skip = Math.floor(this.random() * half);
    for (const k of this.entries.keys()) {
      if (k === keep) continue;
      if (skip-- === 0) return k;
    }
    return undefined;
  }
}

/**
 * Points `m`'s sessionId and runId at `prev`'s equal strings, and its provenance at the entry's
 * newest equal one: JSON.parse gives every message its own copies, and a file's messages share
 * one sessionId, runs of them one runId, and a session's inbound messages mostly one provenance
 * (together about a third of a cached message's heap). Cached messages are never mutated (a
 * read gets copies, or the cached objects for a caller that only reads them), so sharing is safe.
 */
function shareValues<M>(e: Entry<M>, prev: TranscriptMessage | undefined, m: TranscriptMessage): void {
  if (prev) {
    if (m.sessionId === prev.sessionId) m.sessionId = prev.sessionId;
    if (m.runId !== undefined && m.runId === prev.runId) m.runId = prev.runId;
  }
  const p = m.provenance;
  if (p === undefined) return;
  if (e.provenance !== undefined && sameFlat(p, e.provenance)) m.provenance = e.provenance;
  else e.provenance = p;
}

/** Equal own keys holding identical values (a provenance's are strings). */
function sameFlat(a: object, b: object): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    if ((a as Record<string, unknown>)[k] !== (b as Record<string, unknown>)[k]) return false;
  }
  return true;
}

function countId(ids: Map<string, number>, id: string, by: 1 | -1): void {
  const n = (ids.get(id) ?? 0) + by;
  if (n > 0) ids.set(id, n);
  else ids.delete(id);
}

/** A deep copy of a JSON value (as JSON.parse returns them: plain objects, arrays, primitives). */
export function cloneJson<T>(v: T): T {
  if (typeof v !== "object" || v === null) return v;
  if (Array.isArray(v)) return v.map(cloneJson) as T;
  const c: Record<string, unknown> = { ...(v as Record<string, unknown>) };
  for (const k in c) {
    const x = c[k];
    if (typeof x !== "object" || x === null) continue;
    // a JSON key "__proto__" is an own property; plain assignment would set the prototype
    if (k === "__proto__") {
      Object.defineProperty(c, k, {
        value: cloneJson(x),
        writable: true,
        enumerable: true,
        configurable: true,
      });
    } else c[k] = cloneJson(x);
  }
  return c as T;
}
