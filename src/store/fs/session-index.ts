import type { ListSessionsQuery, SessionEntry, SessionKind } from "../types.js";
import { SortedList } from "./sorted-list.js";

type Sorted = SortedList<SessionEntry>;

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
export class SessionIndex {
  private readonly byKey = new Map<string, SessionEntry>();
  private readonly bySessionId = new Map<string, string>();
  private readonly byLabel = new Map<string, Set<string>>();
  private readonly bySpawnedBy = new Map<string, Set<string>>();
  private readonly live: Sorted = new SortedList(compare);
  private readonly archived: Sorted = new SortedList(compare);
  private readonly byAgent = new Map<string, Sorted>();
  private readonly byKind = new Map<SessionKind, Sorted>();
  /** While loading only `byKey` is maintained; `build()` derives the rest in one pass. */
  private loading = true;

  constructor(private readonly classify: (key: string) => SessionKind) {}

  get size(): number {
    return this.byKey.size;
  }

  get(key: string): SessionEntry | undefined {
    return this.byKey.get(key);
  }

  getBySessionId(sessionId: string): SessionEntry | undefined {
    const key = this.bySessionId.get(sessionId);
    return key === undefined ? undefined : this.byKey.get(key);
  }

  /** Every entry, live ones oldest-updated first (snapshots are written so; a reload then sorts cheaply). */
  entries(): SessionEntry[] {
    return this.loading ? [...this.byKey.values()] : [...this.archived.toArray(), ...this.live.toArray()];
  }

  set(entry: SessionEntry): void {
    const old = this.byKey.get(entry.key);
    this.byKey.set(entry.key, entry);
    if (this.loading) return;
    if (old) this.unindex(old);
    this.index(entry);
  }

  remove(key: string): boolean {
    const old = this.byKey.get(key);
    if (!old) return false;
    this.byKey.delete(key);
    if (!this.loading) this.unindex(old);
    return true;
  }

  /** Ends the load phase: builds every derived index from `byKey` with one sort. */
  build(): void {
    const sorted = [...this.byKey.values()].sort(compare);
    for (const e of sorted) {
      // appending in sorted order keeps every partition sorted without another sort
      this.indexLookups(e);
      if (e.archivedAt !== undefined) {
        this.archived.appendMax(e);
        continue;
      }
      this.live.appendMax(e);
      listFor(this.byAgent, e.agentId).appendMax(e);
      listFor(this.byKind, this.classify(e.key)).appendMax(e);
    }
    this.loading = false;
  }

  list(query: ListSessionsQuery, now: number): SessionEntry[] {
    const limit = Math.floor(query.limit ?? 50);
    if (!(limit > 0)) return [];
    const cutoff =
      query.activeMinutes === undefined ? Number.NEGATIVE_INFINITY : now - query.activeMinutes * 60_000;
    const kinds = query.kinds && query.kinds.length > 0 ? new Set(query.kinds) : null;
    const search = query.search ? query.search.toLowerCase() : null;
    const match = (e: SessionEntry, checkKind: boolean): boolean =>
      (query.agentId === undefined || e.agentId === query.agentId) &&
      (query.label === undefined || e.label === query.label) &&
      (query.spawnedBy === undefined || e.spawnedBy === query.spawnedBy) &&
      (query.includeArchived === true || e.archivedAt === undefined) &&
      e.updatedAt >= cutoff &&
      (!checkKind || kinds === null || kinds.has(this.classify(e.key))) &&
      (search === null ||
        e.key.toLowerCase().includes(search) ||
        (e.label?.toLowerCase().includes(search) ?? false) ||
        (e.displayName?.toLowerCase().includes(search) ?? false));

    // label and spawnedBy have their own small key sets: filter those instead of walking lists
    const keySets: Array<Set<string> | undefined> = [];
    if (query.label !== undefined) keySets.push(this.byLabel.get(query.label));
    if (query.spawnedBy !== undefined) keySets.push(this.bySpawnedBy.get(query.spawnedBy));
    if (keySets.length > 0) {
      if (keySets.some((s) => s === undefined)) return [];
      const smallest = (keySets as Array<Set<string>>).reduce((a, b) => (a.size <= b.size ? a : b));
      return this.pick(smallest)
        .filter((e) => match(e, true))
        .sort((a, b) => compare(b, a))
        .slice(0, limit);
    }

    // walk the smallest live partition that covers the query: the agent's, or the kinds'
    let sources: Sorted[];
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

    const collect = (list: Sorted): SessionEntry[] => {
      const out: SessionEntry[] = [];
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

  findByLabel(label: string, agentId?: string): SessionEntry[] {
    const keys = this.byLabel.get(label);
    if (!keys) return [];
    return this.pick(keys)
      .filter((e) => agentId === undefined || e.agentId === agentId)
      .sort((a, b) => compare(b, a));
  }

  private pick(keys: Set<string>): SessionEntry[] {
    const out: SessionEntry[] = [];
    for (const k of keys) {
      const e = this.byKey.get(k);
      if (e) out.push(e);
    }
    return out;
  }

  private index(e: SessionEntry): void {
    this.indexLookups(e);
    if (e.archivedAt !== undefined) {
      this.archived.insert(e);
      return;
    }
    this.live.insert(e);
    listFor(this.byAgent, e.agentId).insert(e);
    listFor(this.byKind, this.classify(e.key)).insert(e);
  }

  private indexLookups(e: SessionEntry): void {
    this.bySessionId.set(e.sessionId, e.key);
    if (e.label !== undefined) addToSet(this.byLabel, e.label, e.key);
    if (e.spawnedBy !== undefined) addToSet(this.bySpawnedBy, e.spawnedBy, e.key);
  }

  private unindex(e: SessionEntry): void {
    if (this.bySessionId.get(e.sessionId) === e.key) this.bySessionId.delete(e.sessionId);
    if (e.label !== undefined) removeFromSet(this.byLabel, e.label, e.key);
    if (e.spawnedBy !== undefined) removeFromSet(this.bySpawnedBy, e.spawnedBy, e.key);
    if (e.archivedAt !== undefined) {
      this.archived.remove(e);
      return;
    }
    this.live.remove(e);
    removeFromList(this.byAgent, e.agentId, e);
    removeFromList(this.byKind, this.classify(e.key), e);
  }
}

/** Total order: updatedAt, then key (keys are unique, so every entry has one position). */
function compare(a: SessionEntry, b: SessionEntry): number {
  return a.updatedAt - b.updatedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

function listFor<K>(map: Map<K, Sorted>, k: K): Sorted {
  let list = map.get(k);
  if (!list) {
    list = new SortedList(compare);
    map.set(k, list);
  }
  return list;
}

function removeFromList<K>(map: Map<K, Sorted>, k: K, e: SessionEntry): void {
  const list = map.get(k);
  if (!list) return;
  list.remove(e);
  if (list.size === 0) map.delete(k);
}

function addToSet(map: Map<string, Set<string>>, k: string, v: string): void {
  let s = map.get(k);
  if (!s) {
    s = new Set();
    map.set(k, s);
  }
  s.add(v);
}

function removeFromSet(map: Map<string, Set<string>>, k: string, v: string): void {
  const s = map.get(k);
  if (!s) return;
  s.delete(v);
  if (s.size === 0) map.delete(k);
}
