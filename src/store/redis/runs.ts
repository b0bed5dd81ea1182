import type { Redis } from "ioredis";
import { putRun } from "../../redis/commands/store.js";
import type { ScriptRunner } from "../../redis/scripts.js";
import { mergePatch, RUN_IDENTITY } from "../records.js";
import { KeyedSerial } from "../serial.js";
import { FINAL_RUN_STATUSES, type RunRecord, type RunStore } from "../types.js";
import { type CasResult, GUESSED, KnownRevisions, RETRY, type Revision, withCasRetry } from "./cas.js";
import type { RedisKeys } from "./keys.js";
import { normalizeRun, parseObject } from "./records.js";
import { assertOpen, type WarningSink } from "./warnings.js";

/** Runs whose last read or written revision this process keeps (see `known`). */
const KNOWN_RUNS = 1024;

export interface RedisRunStoreOptions {
  client: Redis;
  keys: RedisKeys;
  scripts: ScriptRunner;
  warnings: WarningSink;
  /** Finished runs expire this long after their last write; 0 keeps them forever. */
  finishedRunTtlMs: number;
}

/**
 * Runs in one hash each (`data` = run JSON, `rev`, `ix` = its session's zset), listed per
 * session by a zset on `createdAt`. Writes go through putRun-2; `patch` merges in JS and
 * writes only if the run is still at the revision it read (retrying when another process —
 * say a pipeline worker — won), serialised per run within this process.
 *
 * A `patch` first tries against what this process last read or wrote (`KnownRevisions`, cas.ts);
 * knowing neither, against the caller's `assumed` record, compared by value (the JSON its first
 * writer stored): a worker marking a run another process queued writes without reading it.
 *
 * Retention: a run whose status is final expires `finishedRunTtlMs` after its last write
 * (Redis TTL on its hash; an unfinished run never expires). Its member in the session zset
 * is removed lazily, the next time `listBySession` meets it.
 */
export class RedisRunStore implements RunStore {
  private readonly serial = new KeyedSerial();
  private readonly known = new KnownRevisions(KNOWN_RUNS);
  private closed = false;

  constructor(private readonly o: RedisRunStoreOptions) {}

  async put(run: RunRecord): Promise<void> {
    assertOpen(this.closed, "runs");
    const stored = normalizeRun(run, "run");
    await this.serial.run(stored.runId, () => this.write(stored, ""));
  }

  async get(runId: string): Promise<RunRecord | null> {
    assertOpen(this.closed, "runs");
    return this.decode(runId, (await this.read(runId)).data);
  }

  async patch(runId: string, patch: Partial<RunRecord>, assumed?: RunRecord): Promise<RunRecord | null> {
    assertOpen(this.closed, "runs");
    // `assumed` as putRun stored it (the same JSON.stringify of the same fields)
    const guess =
      assumed && assumed.runId === runId ? { data: JSON.stringify(assumed), rev: GUESSED } : undefined;
    return this.serial.run(runId, () =>
      withCasRetry(`patch of run ${runId}`, () =>
        this.known.attempt(
          runId,
          () => this.read(runId),
          (r) => this.patchFrom(runId, r, patch),
          guess,
        ),
      ),
    );
  }

  private async patchFrom(
    runId: string,
    { data, rev }: Revision,
    patch: Partial<RunRecord>,
  ): Promise<CasResult<RunRecord | null>> {
    const cur = this.decode(runId, data);
    const guessed = rev === GUESSED;
    // absent as read; a guess that does not decode says nothing: read it
    if (cur === null || data === null) return guessed ? RETRY : { retry: false, value: null };
    const stored = normalizeRun(mergePatch(cur, patch, RUN_IDENTITY) as unknown as RunRecord, "patch");
    // a guessed record is compared by its JSON, a read or written one by its revision
    if (!(await (guessed ? this.write(stored, "", data) : this.write(stored, rev)))) return RETRY;
    return { retry: false, value: JSON.parse(JSON.stringify(stored)) as RunRecord };
  }

  /** The record's JSON and revision, remembered in `known`. */
  private read(runId: string): Promise<Revision> {
    return this.known.read(this.o.client, this.o.keys.run(runId), runId);
  }

  /** Newest-created first (ties: runId descending). */
  async listBySession(sessionKey: string, limit: number): Promise<RunRecord[]> {
    assertOpen(this.closed, "runs");
    const n = Math.floor(limit);
    if (!(n > 0)) return [];
    const { client, keys } = this.o;
    const index = keys.sessionRuns(sessionKey);
    const out: RunRecord[] = [];
    let offset = 0;
    while (out.length < n) {
      const want = n - out.length;
      const ids = await client.zrevrange(index, offset, offset + want - 1);
      if (ids.length === 0) break;
      const pipe = client.pipeline();
      for (const id of ids) pipe.hget(keys.run(id), "data");
      const res = (await pipe.exec()) ?? [];
      const gone: string[] = [];
      ids.forEach((id, i) => {
        const [err, data] = res[i] ?? [null, null];
        if (err) throw err;
        const r = this.decode(id, data as string | null);
        if (r && r.sessionKey === sessionKey) out.push(r);
        else if (data === null) gone.push(id); // expired (finished-run TTL)
      });
      if (gone.length > 0) await client.zrem(index, ...gone);
      offset += ids.length - gone.length;
      if (ids.length < want) break;
    }
    return out;
  }

  /** Waits for this process's queued writes. Idempotent; the client stays open. */
  async close(): Promise<void> {
    this.closed = true;
    await this.serial.drain();
  }

  /** `expectedRev` "" = any revision; `expectedData` non-empty: only while the stored JSON is it. */
  private async write(run: RunRecord, expectedRev: string, expectedData = ""): Promise<boolean> {
    const { keys, scripts, finishedRunTtlMs } = this.o;
    const ttl = FINAL_RUN_STATUSES.has(run.status) ? finishedRunTtlMs : 0;
    const data = JSON.stringify(run);
    const rev = await scripts.run(
      putRun,
      [keys.run(run.runId), keys.sessionRuns(run.sessionKey)],
      [run.runId, data, run.createdAt, expectedRev, ttl, expectedData],
    );
    return this.known.wrote(run.runId, data, rev);
  }

  private decode(runId: string, data: string | null | undefined): RunRecord | null {
    if (data === null || data === undefined) return null;
    const r = parseObject<RunRecord>(data);
    if (r === null) this.o.warnings.add(`redis store: run ${runId}: unreadable record skipped`, { runId });
    return r;
  }
}
