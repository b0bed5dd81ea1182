import { fnv1a } from "../../hash.js";
import type { ListSessionsQuery, SessionKind } from "../types.js";
import { KeyTable } from "./key-table.js";
import { SortedList } from "./sorted-list.js";

/**
 * What the index knows of an entry: the fields its lookups, orders and filters use (the rest
 * of the entry stays on disk, read when it is returned).
 */
export interface IndexedSession {
  readonly key: string;
  /** `sessionIdHash(sessionId)`: lookups by sessionId check the entry itself. */
  readonly sid: number;
  readonly agentId: string;
  readonly updatedAt: number;
  /** `archivedAt !== undefined`. */
  readonly archived: boolean;
  readonly label: string | undefined;
  readonly spawnedBy: string | undefined;
  readonly displayName: string | undefined;
}

/**
 * The same fields positionally, in that order: what the sidecar reader hands out and refs are
 * made from without an object per entry in between (session-sidecar.ts, sessions.ts).
 */
export type IndexFields = [
  key: string,
  sid: number,
  agentId: string,
  updatedAt: number,
  archived: boolean,
  label: string | undefined,
  spawnedBy: string | undefined,
  displayName: string | undefined,
];

/** A 32-bit FNV-1a hash of a sessionId (a small integer: no allocation as a Map key). */
export function sessionIdHash(s: string): number {
  return fnv1a(s);
}

/** One key, or a set of them (most labels and parents have one entry: no Set for those). */
type Keys = string | Set<string>;

/**
 * The in-memory session index: every entry by key, lookups by sessionId, label and spawnedBy,
 * and lists sorted by (updatedAt, key) so `list` walks newest-first and stops at its limit:
 * live (unarchived) entries overall, per agent and per kind; archived entries in one list of
 * their own, so piles of archived sub-agents never slow down the usual query. An update is a
 * remove and an insert in a few SortedLists (logarithmic plus one small splice each).
 *
 * Entries stored here are never mutated: a change replaces the object. That lets a compaction
 * capture the state by reference, and readers get copies from the store layer.
 */
export class SessionIndex<T extends IndexedSession> {
  private readonly byKey = new KeyTable<T>();
  /** sessionId hash → entry (or entries, on a collision). */
  private readonly bySessionId = new Map<number, T | T[]>();
  private readonly byLabel = new Map<string, Keys>();
  private readonly bySpawnedBy = new Map<string, Keys>();
  private readonly live = new SortedList<T>(compare);
  private readonly archived = new SortedList<T>(compare);
  private readonly byAgent = new Map<string, SortedList<T>>();
  private readonly byKind = new Map<SessionKind, SortedList<T>>();
  /** While loading only `byKey` is maintained; `build()` derives the rest in one pass. */
  private loading = true;
  /**
   * While loading: every entry so far came in (updatedAt, key) order within its partition
   * (archived, live) and none replaced another — a snapshot's own order — so `byKey`'s insertion
   * order is already sorted and `build()` needs no sort (a million-entry sort is ~0.3 s).
   */
  private inOrder = true;
  private lastLive: T | undefined;
  private lastArchived: T | undefined;
  /**
   * The lookups by sessionId, label and spawnedBy are not needed to open or to list: `build()`
   * leaves them to `buildLookups()` (a background pass, or the first call that needs them),
   * which at a million sessions keeps about a second off the start-up.
   */
  private lookupsBuilt = false;
  /** The entries a started build still has to visit (from `lookupsAt` on), or null. */
  private lookupsPending: T[] | null = null;
  private lookupsAt = 0;

  constructor(private readonly classify: (key: string) => SessionKind) {}

  get size(): number {
    return this.byKey.size;
  }

  get(key: string): T | undefined {
    return this.byKey.get(key);
  }

  /** Entries whose sessionId hashes like `sessionId` (the caller checks the sessionId itself). */
  candidatesBySessionId(sessionId: string): readonly T[] {
    this.buildLookups();
    const v = this.bySessionId.get(sessionIdHash(sessionId));
    return v === undefined ? [] : Array.isArray(v) ? v : [v];
  }

  /** Every entry, live ones oldest-updated first (snapshots are written so; a reload then sorts cheaply). */
  entries(): T[] {
    return this.loading ? this.byKey.values() : [...this.archived.toArray(), ...this.live.toArray()];
  }

  set(entry: T): void {
    if (this.loading) {
      const replaced = this.byKey.set(entry) !== undefined;
      if (this.inOrder) {
        const last = entry.archived ? this.lastArchived : this.lastLive;
        if (replaced || (last !== undefined && compare(last, entry) >= 0)) this.inOrder = false;
        else if (entry.archived) this.lastArchived = entry;
        else this.lastLive = entry;
      }
      return;
    }
    const old = this.byKey.set(entry);
    if (old) this.unindex(old);
    this.index(entry);
  }

  /** While loading: room for `n` more entries (a load that knows its count fills the table without growing it). */
  reserve(n: number): void {
    this.byKey.reserve(n);
  }

  /** While loading: forgets every entry set so far (a load that turned out unusable starts over). */
  clearLoaded(): void {
    if (!this.loading) return;
    this.byKey.clear();
    this.inOrder = true;
    this.lastLive = this.lastArchived = undefined;
  }

  remove(key: string): boolean {
    const old = this.byKey.delete(key);
    if (!old) return false;
    if (!this.loading) this.unindex(old);
    return true;
  }

  /** Builds (or finishes building) the lookups by sessionId, label and spawnedBy, once. */
  buildLookups(): void {
    if (this.lookupsBuilt || this.loading) return;
    this.lookupsPending ??= this.byKey.values();
    this.lookupsSlice(Number.POSITIVE_INFINITY);
  }

  /**
   * Builds the lookups in slices of `slice` entries between other work (setImmediate). A
   * change or a lookup before it ends finishes it at once, so nothing ever sees it half done.
   */
  buildLookupsInBackground(slice = 20_000): void {
    if (this.lookupsBuilt || this.loading || this.lookupsPending) return;
    this.lookupsPending = this.byKey.values();
    const step = () => {
      if (!this.lookupsBuilt && !this.lookupsSlice(slice)) setImmediate(step).unref();
    };
    setImmediate(step).unref();
  }

  /** Indexes up to `max` pending entries; true once every entry is in. */
  private lookupsSlice(max: number): boolean {
    const pending = this.lookupsPending;
    if (!pending) return this.lookupsBuilt;
    const end = Math.min(pending.length, this.lookupsAt + max);
    for (let i = this.lookupsAt; i < end; i++) this.indexLookups(pending[i]!);
    this.lookupsAt = end;
    if (end < pending.length) return false;
    this.lookupsPending = null;
    this.lookupsAt = 0;
    this.lookupsBuilt = true;
    return true;
  }

  /** Ends the load phase: builds every derived index from `byKey` with one sort. */
  build(): void {
    const sorted = this.inOrder ? this.byKey.values() : this.byKey.values().sort(compare);
    this.lastLive = this.lastArchived = undefined;
    for (const e of sorted) {
      // appending in sorted order keeps every partition sorted without another sort
      if (e.archived) {
        this.archived.appendMax(e);
        continue;
      }
      this.live.appendMax(e);
      listFor(this.byAgent, e.agentId).appendMax(e);
      listFor(this.byKind, this.classify(e.key)).appendMax(e);
    }
    this.loading = false;
  }

  list(query: ListSessionsQuery, now: number): T[] {
    const limit = Math.floor(query.limit ?? 50);
    if (!(limit > 0)) return [];
    const cutoff =
      query.activeMinutes === undefined ? Number.NEGATIVE_INFINITY : now - query.activeMinutes * 60_000;
    const kinds = query.kinds && query.kinds.length > 0 ? new Set(query.kinds) : null;
    const search = query.search ? query.search.toLowerCase() : null;
    const match = (e: T, checkKind: boolean): boolean =>
      (query.agentId === undefined || e.agentId === query.agentId) &&
      (query.label === undefined || e.label === query.label) &&
      (query.spawnedBy === undefined || e.spawnedBy === query.spawnedBy) &&
      (query.includeArchived === true || !e.archived) &&
      e.updatedAt >= cutoff &&
      (!checkKind || kinds === null || kinds.has(this.classify(e.key))) &&
      (search === null ||
        e.key.toLowerCase().includes(search) ||
        (e.label?.toLowerCase().includes(search) ?? false) ||
        (e.displayName?.toLowerCase().includes(search) ?? false));

    // label and spawnedBy have their own small key sets: filter those instead of walking lists
    const keySets: Array<Keys | undefined> = [];
    if (query.label !== undefined || query.spawnedBy !== undefined) this.buildLookups();
    if (query.label !== undefined) keySets.push(this.byLabel.get(query.label));
    if (query.spawnedBy !== undefined) keySets.push(this.bySpawnedBy.get(query.spawnedBy));
    if (keySets.length > 0) {
      if (keySets.some((s) => s === undefined)) return [];
      const smallest = (keySets as Keys[]).reduce((a, b) => (sizeOf(a) <= sizeOf(b) ? a : b));
      return this.pick(smallest)
        .filter((e) => match(e, true))
        .sort((a, b) => compare(b, a))
        .slice(0, limit);
    }

    // walk the smallest live partition that covers the query: the agent's, or the kinds'
    let sources: Array<SortedList<T>>;
    let checkKind = true;
    const agentList = query.agentId === undefined ? this.live : this.byAgent.get(query.agentId);
    const kindLists = kinds ? [...kinds].flatMap((k) => this.byKind.get(k) ?? []) : null;
    if (kindLists && kindLists.reduce((n, l) => n + l.size, 0) < (agentList?.size ?? 0)) {
      sources = kindLists;
      checkKind = false;
    } else {
      sources = agentList ? [agentList] : [];
    }
    if (query.includeArchived === true) {
      sources = [...sources, this.archived];
      checkKind = true; // the archived list holds every kind
    }

    const collect = (list: SortedList<T>): T[] => {
      const out: T[] = [];
      list.forEachDesc((e) => {
        if (e.updatedAt < cutoff) return false; // sorted: everything further is older
        if (match(e, checkKind)) out.push(e);
        return out.length < limit;
      });
      return out;
    };
    if (sources.length === 1) return collect(sources[0]!);
    // the newest `limit` of a union are among the newest `limit` of each part
    return sources
      .flatMap(collect)
      .sort((a, b) => compare(b, a))
      .slice(0, limit);
  }

  findByLabel(label: string, agentId?: string): T[] {
    this.buildLookups();
    const keys = this.byLabel.get(label);
    if (!keys) return [];
    return this.pick(keys)
      .filter((e) => agentId === undefined || e.agentId === agentId)
      .sort((a, b) => compare(b, a));
  }

  private pick(keys: Keys): T[] {
    const out: T[] = [];
    for (const k of typeof keys === "string" ? [keys] : keys) {
      const e = this.byKey.get(k);
      if (e) out.push(e);
    }
    return out;
  }

  private index(e: T): void {
    if (this.lookupsPending) this.buildLookups(); // its list predates this change
    if (this.lookupsBuilt) this.indexLookups(e);
    if (e.archived) {
      this.archived.insert(e);
      return;
    }
    this.live.insert(e);
    listFor(this.byAgent, e.agentId).insert(e);
    listFor(this.byKind, this.classify(e.key)).insert(e);
  }

  private indexLookups(e: T): void {
    const same = this.bySessionId.get(e.sid);
    if (same === undefined) this.bySessionId.set(e.sid, e);
    else if (Array.isArray(same)) same.push(e);
    else this.bySessionId.set(e.sid, [same, e]);
    if (e.label !== undefined) addKey(this.byLabel, e.label, e.key);
    if (e.spawnedBy !== undefined) addKey(this.bySpawnedBy, e.spawnedBy, e.key);
  }

  private unindex(e: T): void {
    if (this.lookupsPending) this.buildLookups();
    if (this.lookupsBuilt) this.unindexLookups(e);
    if (e.archived) {
      this.archived.remove(e);
      return;
    }
    this.live.remove(e);
    removeFromList(this.byAgent, e.agentId, e);
    removeFromList(this.byKind, this.classify(e.key), e);
  }

  private unindexLookups(e: T): void {
    const same = this.bySessionId.get(e.sid);
    if (same === e) this.bySessionId.delete(e.sid);
    else if (Array.isArray(same)) {
      const rest = same.filter((x) => x !== e);
      if (rest.length === 1) this.bySessionId.set(e.sid, rest[0]!);
      else this.bySessionId.set(e.sid, rest);
    }
    if (e.label !== undefined) removeKey(this.byLabel, e.label, e.key);
    if (e.spawnedBy !== undefined) removeKey(this.bySpawnedBy, e.spawnedBy, e.key);
  }
}

/** Total order: updatedAt, then key (keys are unique, so every entry has one position). */
function compare(a: IndexedSession, b: IndexedSession): number {
  return a.updatedAt - b.updatedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

function listFor<K, T extends IndexedSession>(map: Map<K, SortedList<T>>, k: K): SortedList<T> {
  let list = map.get(k);
  if (!list) {
    list = new SortedList<T>(compare);
    map.set(k, list);
  }
  return list;
}

function removeFromList<K, T extends IndexedSession>(map: Map<K, SortedList<T>>, k: K, e: T): void {
  const list = map.get(k);
  if (!list) return;
  list.remove(e);
  if (list.size === 0) map.delete(k);
}

function sizeOf(keys: Keys): number {
  return typeof keys === "string" ? 1 : keys.size;
}

function addKey(map: Map<string, Keys>, k: string, v: string): void {
  const s = map.get(k);
  if (s === undefined) map.set(k, v);
  else if (typeof s === "string") {
    if (s !== v) map.set(k, new Set([s, v]));
  } else s.add(v);
}

function removeKey(map: Map<string, Keys>, k: string, v: string): void {
  const s = map.get(k);
  if (s === undefined) return;
  if (typeof s === "string") {
    if (s === v) map.delete(k);
    return;
  }
  s.delete(v);
  if (s.size === 1) map.set(k, s.values().next().value as string);
  else if (s.size === 0) map.delete(k);
}
