import type { Redis } from "ioredis";
import type { ListSessionsQuery, SessionEntry, SessionKind } from "../types.js";
import type { RedisKeys } from "./keys.js";

export interface ListContext {
  client: Redis;
  keys: RedisKeys;
  classifyKind: (key: string) => SessionKind;
  now: () => number;
  /** Entries for session keys, in order; null where one vanished meanwhile. */
  fetch: (sessionKeys: string[]) => Promise<Array<SessionEntry | null>>;
}

/** Largest page read from a zset (and fetched as entries) in one round trip. */
const MAX_PAGE = 2000;
/** First page when filters may drop rows (they often do, so read a little ahead). */
const MIN_FILTERED_PAGE = 64;

/**
 * `SessionStore.list` over the sorted-set indexes: walks the smallest index that covers the
 * query newest-first in pages (ZREVRANGEBYSCORE … LIMIT), drops rows by kind from the key
 * alone before fetching anything, fetches the rest with one pipelined HGET per page, and stops
 * as soon as `limit` rows matched. `activeMinutes` is the score floor, so the walk ends at the
 * cutoff. Pages grow ×2 up to MAX_PAGE while filters keep rejecting rows.
 *
 * Reads are not a snapshot: an entry updated while the walk runs may be missed or (deduped)
 * seen twice at a different position, as with any paged listing.
 */
export async function listSessions(ctx: ListContext, q: ListSessionsQuery): Promise<SessionEntry[]> {
  const limit = q.limit ?? 50;
  if (!(limit > 0)) return [];
  const cutoff =
    q.activeMinutes === undefined ? Number.NEGATIVE_INFINITY : ctx.now() - q.activeMinutes * 60_000;
  const kinds = q.kinds && q.kinds.length > 0 ? new Set(q.kinds) : null;
  const search = q.search ? q.search.toLowerCase() : null;
  const match = (e: SessionEntry): boolean =>
    (q.agentId === undefined || e.agentId === q.agentId) &&
    (q.label === undefined || e.label === q.label) &&
    (q.spawnedBy === undefined || e.spawnedBy === q.spawnedBy) &&
    (q.includeArchived === true || e.archivedAt === undefined) &&
    e.updatedAt >= cutoff &&
    (search === null ||
      e.key.toLowerCase().includes(search) ||
      (e.label?.toLowerCase().includes(search) ?? false) ||
      (e.displayName?.toLowerCase().includes(search) ?? false));

  const picked = await pickSources(ctx, q);
  if (picked.sources.length === 0) return [];
  const exact = picked.exact && kinds === null && search === null;
  const min = Number.isFinite(cutoff) ? String(cutoff) : "-inf";
  const cursor = new MergedCursor(picked.sources.map((key) => new ZsetCursor(ctx.client, key, min)));

  const out: SessionEntry[] = [];
  const seen = new Set<string>();
  let pageSize = exact
    ? Math.min(limit, MAX_PAGE)
    : Math.min(Math.max(limit * 2, MIN_FILTERED_PAGE), MAX_PAGE);
  while (out.length < limit) {
    const batch = await cursor.take(pageSize);
    const wanted = batch.filter((k) => {
      if (seen.has(k)) return false;
      seen.add(k);
      return kinds === null || kinds.has(ctx.classifyKind(k));
    });
    if (wanted.length > 0) {
      for (const e of await ctx.fetch(wanted)) {
        if (e && match(e)) out.push(e);
        if (out.length >= limit) break;
      }
    }
    if (batch.length < pageSize) break; // every source is exhausted
    pageSize = Math.min(pageSize * 2, MAX_PAGE);
  }
  return out;
}

/**
 * The zsets to walk. label / spawnedBy have their own (small) indexes, which include archived
 * entries; otherwise the agent's or the global live index, plus the archived one on request.
 * `exact`: every member of the sources matches the query (before kinds/search).
 */
async function pickSources(
  ctx: ListContext,
  q: ListSessionsQuery,
): Promise<{ sources: string[]; exact: boolean }> {
  const { keys } = ctx;
  const lookups: string[] = [];
  if (q.label !== undefined) lookups.push(keys.labelIndex(q.label));
  if (q.spawnedBy !== undefined) lookups.push(keys.parentIndex(q.spawnedBy));
  if (lookups.length === 1) return { sources: lookups, exact: false };
  if (lookups.length === 2) {
    const [a, b] = await Promise.all(lookups.map((k) => ctx.client.zcard(k)));
    if (a === 0 || b === 0) return { sources: [], exact: false };
    return { sources: [a! <= b! ? lookups[0]! : lookups[1]!], exact: false };
  }
  const scoped = (archived: boolean) =>
    q.agentId === undefined ? keys.allSessions(archived) : keys.agentSessions(q.agentId, archived);
  const sources = q.includeArchived === true ? [scoped(false), scoped(true)] : [scoped(false)];
  return { sources, exact: true };
}

interface Member {
  member: string;
  score: number;
}

/** Walks one zset from the highest score down to `min`, a page at a time. */
class ZsetCursor {
  readonly buf: Member[] = [];
  done = false;
  private offset = 0;

  constructor(
    private readonly client: Redis,
    private readonly key: string,
    private readonly min: string,
  ) {}

  async fill(count: number): Promise<void> {
    const reply = (await this.client.zrevrangebyscore(
      this.key,
      "+inf",
      this.min,
      "WITHSCORES",
      "LIMIT",
      this.offset,
      count,
    )) as unknown[];
    const page = parseWithScores(reply);
    this.offset += page.length;
    if (page.length < count) this.done = true;
    for (const m of page) this.buf.push(m);
  }
}

/** Several zsets merged in Redis's reverse order (score, then member, descending). */
class MergedCursor {
  constructor(private readonly cursors: ZsetCursor[]) {}

  /** Up to `n` members; fewer only when every source is exhausted. */
  async take(n: number): Promise<string[]> {
    const out: string[] = [];
    while (out.length < n) {
      const empty = this.cursors.filter((c) => c.buf.length === 0 && !c.done);
      if (empty.length > 0) await Promise.all(empty.map((c) => c.fill(n)));
      let best: ZsetCursor | null = null;
      for (const c of this.cursors) {
        const head = c.buf[0];
        if (head === undefined) continue;
        const top = best?.buf[0];
        if (!top || head.score > top.score || (head.score === top.score && head.member > top.member))
          best = c;
      }
      if (best === null) break;
      if (this.cursors.length === 1) {
        for (const m of best.buf.splice(0, n - out.length)) out.push(m.member);
      } else {
        out.push(best.buf.shift()!.member);
      }
    }
    return out;
  }
}

/** WITHSCORES replies: flat `[member, score, …]` (RESP2 shapes) or `[[member, score], …]` (RESP3 mapping). */
function parseWithScores(reply: unknown[]): Member[] {
  const out: Member[] = [];
  if (reply.length > 0 && Array.isArray(reply[0])) {
    for (const pair of reply as unknown[][]) out.push({ member: String(pair[0]), score: Number(pair[1]) });
    return out;
  }
  for (let i = 0; i + 1 < reply.length; i += 2)
    out.push({ member: String(reply[i]), score: Number(reply[i + 1]) });
  return out;
}
