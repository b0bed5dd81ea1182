import type { Redis } from "ioredis";
import { InvalidParamsError, SwitchboardError } from "../../errors.js";
import { appendTranscript, archiveTranscript, streamTail } from "../../redis/commands/store.js";
import type { ScriptRunner } from "../../redis/scripts.js";
import { KeyedSerial } from "../serial.js";
import { cloneJson, TailCache, tailCacheStats } from "../tail-cache.js";
import type {
  ReadTailOptions,
  TailCacheStats,
  TranscriptMessage,
  TranscriptRef,
  TranscriptStore,
} from "../types.js";
import type { RedisKeys } from "./keys.js";
import { assertOpen, type WarningSink } from "./warnings.js";

const ROLES = new Set(["user", "assistant", "toolCall", "toolResult", "system", "compaction"]);
const TOOL_ROLES = new Set(["toolCall", "toolResult"]);
/** Largest XREVRANGE page while skipping tool messages backwards. */
const MAX_PAGE = 1000;

export interface RedisTranscriptStoreOptions {
  client: Redis;
  keys: RedisKeys;
  scripts: ScriptRunner;
  warnings: WarningSink;
  now: () => number;
  /** Characters of JSON the tail cache keeps; 0 (or absent) turns it off. */
  tailCacheChars?: number;
}

/** Where a cached tail stands in its stream: the newest entry it holds and the stream's length then. */
interface StreamMark {
  lastId: string;
  len: number;
  /** Appends of this process to the stream whose reply has not come. */
  pending: number;
  /**
   * The newest append of this process to the stream brought the tail up to date in its reply
   * (nothing pending): a read `afterAppend` is answered from the cache without a round trip.
   */
  confirmed: boolean;
}

/**
 * Transcripts as Redis Streams, one per (agentId, sessionId): each message is one entry with
 * fields `r` (role, so tool messages are skipped without parsing) and `m` (message JSON).
 *
 * - append: one script (SADD the id to `<stream>:ids`, XADD only when it was new — an
 *   existing id is a no-op). Commands on one connection run in the order they are issued and
 *   `append` issues its script call synchronously, so appends keep call order. "Durable" means
 *   acknowledged by Redis; surviving a Redis restart is Redis's persistence setting (AOF). When
 *   the stream's tail is cached, the same script returns what other processes appended since
 *   (and the stream's length), so the cached tail takes them and the new message at once.
 * - readTail: from the tail cache when it can answer (see README: one script fetches only the
 *   entries added since, checked against XLEN; none when the read comes `afterAppend` and that
 *   append's reply brought the tail up to date); else XREVRANGE … COUNT from the newest entry
 *   backwards; when tools are filtered out it keeps paging backwards (pages ×2, up to MAX_PAGE)
 *   until `limit` messages or the start. It never reads a whole stream.
 * - count: XLEN (every message; the tools filter applies to readTail only).
 * - archive: RENAME to `<stream>:archived:<reason>:<ms>` — kept, not destroyed.
 */
export class RedisTranscriptStore implements TranscriptStore {
  private closed = false;
  private readonly tails: TailCache<StreamMark> | null;
  /** Cached reads of one stream run one at a time (they bring its entry up to date). */
  private readonly serial = new KeyedSerial();

  constructor(private readonly o: RedisTranscriptStoreOptions) {
    const maxChars = o.tailCacheChars ?? 0;
    this.tails =
      maxChars > 0
        ? new TailCache<StreamMark>({
            maxLinesPerFile: MAX_PAGE,
            maxCharsPerFile: Math.min(256 * 1024, maxChars),
            maxChars,
          })
        : null;
  }

  locate(ref: TranscriptRef): string {
    checkRef(ref);
    return this.o.keys.transcript(ref.agentId, ref.sessionId);
  }

  /**
   * One script (appendTranscript-2): the id check and the XADD are one step. A cached tail
   * passes where it stands, and the reply brings it up to date (`taken`).
   */
  append(ref: TranscriptRef, message: TranscriptMessage): Promise<boolean> {
    try {
      assertOpen(this.closed, "transcripts");
      checkMessage(message);
      const key = this.locate(ref);
      const keys = [key, this.o.keys.transcriptIds(ref.agentId, ref.sessionId)];
      const json = JSON.stringify(message);
      const mark = this.tails?.meta(key);
      // no await before the script call: that is what keeps concurrent appends in call order
      if (!mark)
        return this.o.scripts.run(appendTranscript, keys, [message.id, message.role, json]).then(appended);
      const at = { lastId: mark.lastId, len: mark.len };
      mark.pending++;
      mark.confirmed = false;
      return this.o.scripts
        .run(appendTranscript, keys, [message.id, message.role, json, at.lastId, MAX_PAGE])
        .then(
          (reply) => {
            // in the same callback as `taken`: another append's reply may be handled in between
            mark.pending--;
            if (Array.isArray(reply)) this.taken(key, mark, at, reply, json);
            return appended(reply);
          },
          (err: unknown) => {
            mark.pending--;
            throw err;
          },
        );
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * An append's reply to a cached tail: the entries other processes appended after `at` and the
   * new message join the tail, when it still stands where the append found it and the stream's
   * length agrees (else it is left for the next read to check).
   */
  private taken(
    key: string,
    mark: StreamMark,
    at: Omit<StreamMark, "pending" | "confirmed">,
    reply: unknown[],
    json: string,
  ): void {
    const tails = this.tails!;
    const [, id, page, len] = reply;
    if (typeof id !== "string" || !Array.isArray(page) || typeof len !== "number") return;
    if (tails.meta(key) !== mark || mark.lastId !== at.lastId || mark.len !== at.len) return;
    if (page.length >= MAX_PAGE || len !== at.len + page.length + 1) return;
    this.cacheEntries(key, page as Array<[string, string[]]>);
    if (tails.meta(key) !== mark) return; // the tail was dropped (over its bounds)
    tails.append(key, JSON.parse(json) as TranscriptMessage, json.length);
    mark.lastId = id;
    mark.len = len;
    if (mark.pending === 0) mark.confirmed = true;
  }

  /**
   * Appends many messages in one pipeline (bulk imports and benchmarks); same layout and
   * order as one `append` per message.
   */
  async appendBatch(ref: TranscriptRef, messages: readonly TranscriptMessage[]): Promise<void> {
    assertOpen(this.closed, "transcripts");
    const key = this.locate(ref);
    for (const m of messages) checkMessage(m);
    const ids = this.o.keys.transcriptIds(ref.agentId, ref.sessionId);
    const pipe = this.o.client.pipeline();
    for (const m of messages) pipe.sadd(ids, m.id).xadd(key, "*", ...entryFields(m));
    for (const [err] of (await pipe.exec()) ?? []) if (err) throw err;
  }

  async readHead(
    ref: TranscriptRef,
    opts: { limit: number; maxBytes?: number },
  ): Promise<TranscriptMessage[]> {
    assertOpen(this.closed, "transcripts");
    const key = this.locate(ref);
    const limit = Math.floor(opts.limit);
    if (!(limit > 0)) return [];
    const maxBytes = Math.max(1, Math.floor(opts.maxBytes ?? 64 * 1024));
    const page = (await this.o.client.xrange(key, "-", "+", "COUNT", Math.min(limit, MAX_PAGE))) as Array<
      [string, string[]]
    >;
    const out: TranscriptMessage[] = [];
    let bytes = 0;
    for (const [id, fields] of page) {
      const raw = field(fields, "m");
      bytes += raw?.length ?? 0;
      if (bytes > maxBytes) break;
      const m = this.parse(key, id, raw);
      if (m) out.push(m);
    }
    return out;
  }

  async readTail(ref: TranscriptRef, opts: ReadTailOptions): Promise<TranscriptMessage[]> {
    assertOpen(this.closed, "transcripts");
    const key = this.locate(ref);
    const limit = Math.floor(opts.limit);
    if (!(limit > 0)) return [];
    const includeTools = opts.includeTools === true;
    if (this.tails) {
      const readOnly = opts.readOnly === true;
      const mark = this.tails.meta(key);
      if (opts.afterAppend && mark?.confirmed && mark.pending === 0) {
        const hit = this.tails.read(key, limit, includeTools, readOnly);
        if (hit) return hit;
      }
      const fromCache = await this.serial.run(key, async () => {
        const cached = await this.readCached(key, limit, includeTools, readOnly);
        if (cached || !includeTools || limit > MAX_PAGE) return cached;
        return this.readAndCache(key, limit, readOnly);
      });
      if (fromCache) return fromCache;
    }
    const out: TranscriptMessage[] = [];
    let end = "+";
    let count = includeTools ? limit : Math.min(Math.max(limit * 2, 16), MAX_PAGE);
    for (;;) {
      const page = (await this.o.client.xrevrange(key, end, "-", "COUNT", count)) as Array<
        [string, string[]]
      >;
      for (const [id, fields] of page) {
        const role = field(fields, "r");
        if (!includeTools && role !== undefined && TOOL_ROLES.has(role)) continue;
        const m = this.parse(key, id, field(fields, "m"));
        if (m === null || (!includeTools && TOOL_ROLES.has(m.role))) continue;
        out.push(m);
        if (out.length >= limit) return out.reverse();
      }
      if (page.length < count) return out.reverse(); // reached the start
      end = `(${page[page.length - 1]![0]}`;
      count = Math.min(count * 2, MAX_PAGE);
    }
  }

  /**
   * The cached tail of `key` brought up to date: one script (streamTail-1) fetches the entries
   * added after the newest cached one (by any process) and the stream's length. A length other
   * than the cached length plus what was fetched means the stream is not the one cached (archived
   * and started again, or lost entries): the entry is dropped. Null when the cache cannot answer.
   */
  private async readCached(
    key: string,
    limit: number,
    includeTools: boolean,
    readOnly: boolean,
  ): Promise<TranscriptMessage[] | null> {
    const tails = this.tails!;
    const mark = tails.meta(key);
    if (!mark) return null;
    const { lastId } = mark;
    const [fresh, len] = await this.readPage(key, "after", lastId, MAX_PAGE);
    // (an append's reply may have moved the tail on meanwhile: then `fresh` overlaps it)
    if (tails.meta(key) !== mark || mark.lastId !== lastId) return null;
    if (fresh.length >= MAX_PAGE || len !== mark.len + fresh.length) {
      tails.delete(key);
      return null;
    }
    this.cacheEntries(key, fresh);
    if (fresh.length > 0) mark.lastId = fresh[fresh.length - 1]![0];
    mark.len = len;
    return tails.read(key, limit, includeTools, readOnly);
  }

  /** Stream entries the cached tail of `key` gains (unreadable ones are reported and skipped). */
  private cacheEntries(key: string, entries: Array<[string, string[]]>): void {
    for (const [id, fields] of entries) {
      const text = field(fields, "m");
      const m = this.parse(key, id, text);
      if (m) this.tails!.append(key, m, text!.length);
    }
  }

  /**
   * The newest `limit` entries (tools included) and the stream's length in one script
   * (streamTail-1); they become the cached tail.
   */
  private async readAndCache(key: string, limit: number, readOnly: boolean): Promise<TranscriptMessage[]> {
    const [page, len] = await this.readPage(key, "newest", "", limit);
    const msgs: TranscriptMessage[] = [];
    const sizes: number[] = [];
    for (let i = page.length - 1; i >= 0; i--) {
      const [id, fields] = page[i]!;
      const text = field(fields, "m");
      const m = this.parse(key, id, text);
      if (!m) continue;
      msgs.push(m);
      sizes.push(text!.length);
    }
    const out = readOnly ? msgs.slice() : msgs.map(cloneJson);
    const mark: StreamMark = { lastId: page[0]?.[0] ?? "0-0", len, pending: 0, confirmed: false };
    this.tails!.set(key, msgs, sizes, page.length < limit, mark);
    return out;
  }

  /** One streamTail-1 call: a page of `key` and its length, read together. */
  private async readPage(
    key: string,
    mode: "after" | "newest",
    after: string,
    count: number,
  ): Promise<[Array<[string, string[]]>, number]> {
    const res = await this.o.scripts.run(streamTail, [key], [mode, after, count]);
    if (!Array.isArray(res) || !Array.isArray(res[0]) || typeof res[1] !== "number")
      throw new SwitchboardError("INTERNAL", `redis store: ${key}: unexpected reply to ${streamTail.name}`);
    return [res[0] as Array<[string, string[]]>, res[1]];
  }

  async count(ref: TranscriptRef): Promise<number> {
    assertOpen(this.closed, "transcripts");
    return this.o.client.xlen(this.locate(ref));
  }

  archivedLocation(ref: TranscriptRef, reason: "archived" | "deleted", at: number): string {
    checkRef(ref);
    return this.o.keys.archivedTranscript(ref.agentId, ref.sessionId, reason, String(at));
  }

  async archive(
    ref: TranscriptRef,
    reason: "archived" | "deleted",
    opts: { at?: number } = {},
  ): Promise<string | null> {
    assertOpen(this.closed, "transcripts");
    if (reason !== "archived" && reason !== "deleted") {
      throw new InvalidParamsError('reason: must be "archived" or "deleted"', { field: "reason" });
    }
    const live = this.locate(ref);
    const stamp = String(opts.at ?? this.o.now());
    for (let i = 0; i < 100; i++) {
      const target = this.o.keys.archivedTranscript(
        ref.agentId,
        ref.sessionId,
        reason,
        i === 0 ? stamp : `${stamp}-${i}`,
      );
      const ids = this.o.keys.transcriptIds(ref.agentId, ref.sessionId);
      const r = await this.o.scripts.run(archiveTranscript, [live, target, ids], []);
      this.tails?.delete(live); // another process's cache finds out by the stream's length
      if (r === 1) return target;
      if (r === 0) return null;
      // -1: an archive with this name exists (two archives in one ms): try the next suffix
    }
    throw new SwitchboardError("CONFLICT", `redis store: no free archive name for ${live} at ${stamp}`);
  }

  warnings(): string[] {
    return this.o.warnings.all();
  }

  cacheStats(): TailCacheStats {
    return tailCacheStats(this.tails);
  }

  /** Idempotent; nothing to flush (every append was acknowledged), the client stays open. */
  async close(): Promise<void> {
    this.closed = true;
  }

  private parse(key: string, id: string, text: string | undefined): TranscriptMessage | null {
    if (text !== undefined) {
      try {
        const v: unknown = JSON.parse(text);
        if (isMessage(v)) return v;
      } catch {
        // reported below
      }
    }
    this.o.warnings.add(`redis store: ${key}: unreadable stream entry ${id} skipped`, { key, id });
    return null;
  }
}

/** appendTranscript-2 appended (1, or `{ 1, … }` with a cached tail's mark), rather than found the id (0). */
const appended = (reply: unknown): boolean => (Array.isArray(reply) ? reply[0] : reply) === 1;

function entryFields(m: TranscriptMessage): [string, string, string, string] {
  return ["r", m.role, "m", JSON.stringify(m)];
}

/** A field of a stream entry (`[name, value, name, value, …]`). */
function field(fields: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

function checkRef(ref: TranscriptRef): void {
  for (const f of ["agentId", "sessionId"] as const) {
    if (typeof ref?.[f] !== "string" || ref[f].length === 0) {
      throw new InvalidParamsError(`ref.${f}: must be a non-empty string`, { field: f });
    }
  }
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

function isMessage(v: unknown): v is TranscriptMessage {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const m = v as Record<string, unknown>;
  return typeof m.id === "string" && typeof m.role === "string" && ROLES.has(m.role);
}
