import type { Redis } from "ioredis";
import { InvalidParamsError } from "../../errors.js";
import { deleteSession, putSession } from "../../redis/commands/store.js";
import type { ScriptRunner } from "../../redis/scripts.js";
import { mergePatch, SESSION_IDENTITY } from "../records.js";
import { KeyedSerial } from "../serial.js";
import type { ListSessionsQuery, SessionEntry, SessionKind, SessionPatch, SessionStore } from "../types.js";
import { type CasResult, KnownRevisions, RETRY, type Revision, withCasRetry } from "./cas.js";
import type { RedisKeys } from "./keys.js";
import { normalizeEntry, parseObject } from "./records.js";
import { listSessions } from "./session-list.js";
import { assertOpen, type WarningSink } from "./warnings.js";

/** Entries whose last read or written revision this process keeps (see `known`). */
const KNOWN_ENTRIES = 1024;

export interface RedisSessionStoreOptions {
  client: Redis;
  keys: RedisKeys;
  scripts: ScriptRunner;
  warnings: WarningSink;
  classifyKind: (key: string) => SessionKind;
  now: () => number;
}

/**
 * Session entries in one hash each (`data` = entry JSON, `rev` = revision, plus the index keys
 * the entry is filed under), indexed by sorted sets on `updatedAt` (global and per agent, live
 * and archived apart; per label; per spawnedBy) and a sessionId → key hash (layout: keys.ts).
 *
 * Every write goes through putSession-6 / deleteSession-2, so an entry and its indexes change
 * together. `update` and `patch` merge in JS and write only if the entry is still at the
 * revision they read (retrying when another process won); within this process they are also
 * serialised per key, so they never conflict with each other. Consequently an `update` fn may
 * run more than once when processes race — it must be a pure function of its argument.
 * A `patch` first tries against what this process last read or wrote (`KnownRevisions`, cas.ts).
 */
export class RedisSessionStore implements SessionStore {
  private readonly serial = new KeyedSerial();
  private readonly known = new KnownRevisions(KNOWN_ENTRIES);
  private closed = false;

  constructor(private readonly o: RedisSessionStoreOptions) {}

  async get(key: string): Promise<SessionEntry | null> {
    assertOpen(this.closed, "sessions");
    return this.decode(key, (await this.read(key)).data);
  }

  async put(entry: SessionEntry): Promise<void> {
    assertOpen(this.closed, "sessions");
    const stored = normalizeEntry(entry, "entry");
    await this.serial.run(stored.key, () => this.write(stored, ""));
  }

  async update(
    key: string,
    fn: (current: SessionEntry | null) => SessionEntry | null,
  ): Promise<SessionEntry | null> {
    assertOpen(this.closed, "sessions");
    return this.serial.run(key, () =>
      withCasRetry(`update of session ${key}`, async () => {
        const { data, rev } = await this.read(key);
        const next = fn(this.decode(key, data));
        if (next === null) return { retry: false, value: this.decode(key, data) };
        const stored = normalizeEntry(next, "update result");
        if (stored.key !== key) {
          throw new InvalidParamsError(`update result.key: must stay "${key}" (got "${stored.key}")`, {
            field: "key",
          });
        }
        if (!(await this.write(stored, rev))) return RETRY;
        return { retry: false, value: copy(stored) };
      }),
    );
  }

  async patch(key: string, patch: SessionPatch): Promise<SessionEntry | null> {
    assertOpen(this.closed, "sessions");
    return this.serial.run(key, () =>
      withCasRetry(`patch of session ${key}`, () =>
        this.known.attempt(
          key,
          () => this.read(key),
          (r) => this.patchFrom(key, r, patch),
        ),
      ),
    );
  }

  private async patchFrom(
    key: string,
    { data, rev }: Revision,
    patch: SessionPatch,
  ): Promise<CasResult<SessionEntry | null>> {
    const cur = this.decode(key, data);
    if (cur === null) return { retry: false, value: null };
    // identity fields are not patchable
    const stored = normalizeEntry(
      mergePatch(cur, patch, SESSION_IDENTITY) as unknown as SessionEntry,
      "patch",
    );
    if (!(await this.write(stored, rev))) return RETRY;
    return { retry: false, value: copy(stored) };
  }

  async delete(key: string): Promise<boolean> {
    assertOpen(this.closed, "sessions");
    const { keys, scripts } = this.o;
    return this.serial.run(key, async () => {
      this.known.forget(key);
      const n = await scripts.run(deleteSession, [keys.session(key), keys.sessionIdIndex()], [key]);
      return n === 1;
    });
  }

  async getBySessionId(sessionId: string): Promise<SessionEntry | null> {
    assertOpen(this.closed, "sessions");
    const key = await this.o.client.hget(this.o.keys.sessionIdIndex(), sessionId);
    if (key === null) return null;
    const e = await this.get(key);
    return e && e.sessionId === sessionId ? e : null;
  }

  async list(query: ListSessionsQuery): Promise<SessionEntry[]> {
    assertOpen(this.closed, "sessions");
    const { client, keys, classifyKind, now } = this.o;
    return listSessions({ client, keys, classifyKind, now, fetch: (ks) => this.fetch(ks) }, query);
  }

  /** Newest-updated first; archived entries included (as in the fs driver). */
  async findByLabel(label: string, agentId?: string): Promise<SessionEntry[]> {
    assertOpen(this.closed, "sessions");
    const members = await this.o.client.zrevrange(this.o.keys.labelIndex(label), 0, -1);
    const entries = await this.fetch(members);
    return entries.filter(
      (e): e is SessionEntry =>
        e !== null && e.label === label && (agentId === undefined || e.agentId === agentId),
    );
  }

  async count(): Promise<number> {
    assertOpen(this.closed, "sessions");
    const { client, keys } = this.o;
    const [live, archived] = await Promise.all([
      client.zcard(keys.allSessions(false)),
      client.zcard(keys.allSessions(true)),
    ]);
    return live + archived;
  }

  /** Waits for this process's queued writes. Idempotent; the client stays open. */
  async close(): Promise<void> {
    this.closed = true;
    await this.serial.drain();
  }

  // ---------------------------------------------------------------- internals

  /** Entries for many keys in one pipelined round trip. */
  private async fetch(sessionKeys: string[]): Promise<Array<SessionEntry | null>> {
    if (sessionKeys.length === 0) return [];
    const pipe = this.o.client.pipeline();
    for (const k of sessionKeys) pipe.hget(this.o.keys.session(k), "data");
    const res = (await pipe.exec()) ?? [];
    return sessionKeys.map((k, i) => {
      const [err, data] = res[i] ?? [null, null];
      if (err) throw err;
      return this.decode(k, data as string | null);
    });
  }

  /** The entry's JSON and revision, remembered in `known`. */
  private read(key: string): Promise<Revision> {
    return this.known.read(this.o.client, this.o.keys.session(key), key);
  }

  /** Writes the entry with its indexes; false when `expectedRev` ("" = any) was stale. */
  private async write(e: SessionEntry, expectedRev: string): Promise<boolean> {
    const { keys, scripts } = this.o;
    const archived = e.archivedAt !== undefined;
    const hash = keys.session(e.key);
    const data = JSON.stringify(e);
    const rev = await scripts.run(
      putSession,
      [
        hash,
        keys.sessionIdIndex(),
        keys.allSessions(archived),
        keys.agentSessions(e.agentId, archived),
        e.label !== undefined ? keys.labelIndex(e.label) : hash, // placeholder, unused
        e.spawnedBy !== undefined ? keys.parentIndex(e.spawnedBy) : hash, // placeholder, unused
      ],
      [
        e.key,
        data,
        e.updatedAt,
        e.sessionId,
        expectedRev,
        e.label !== undefined ? "1" : "0",
        e.spawnedBy !== undefined ? "1" : "0",
      ],
    );
    return this.known.wrote(e.key, data, rev);
  }

  private decode(key: string, data: string | null | undefined): SessionEntry | null {
    if (data === null || data === undefined) return null;
    const e = parseObject<SessionEntry>(data);
    if (e === null) this.o.warnings.add(`redis store: session ${key}: unreadable entry skipped`, { key });
    return e;
  }
}

function copy<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}
