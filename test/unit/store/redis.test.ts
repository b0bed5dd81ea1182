import { createHash, randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, afterEach, expect, it, vi } from "vitest";
import { SwitchboardError } from "../../../src/errors.js";
import { silentLogger } from "../../../src/log.js";
import { deleteSession, putSession } from "../../../src/redis/commands/store.js";
import { streamTail } from "../../../src/redis/commands/streamTail-1.js";
import { ScriptRunner } from "../../../src/redis/scripts.js";
import {
  createRedisStore,
  type ParsedKey,
  RedisKeys,
  type RedisStore,
  type RedisStoreOptions,
} from "../../../src/store/redis/index.js";
import type { SessionEntry, TranscriptMessage, TranscriptRef } from "../../../src/store/types.js";
import { storeContract } from "../../contract/store.js";
import { REDIS_URL, randomPrefix } from "../../helpers.js";
import { describeRedis, newRedisClient, unlinkMatching } from "../../redis.js";

const T0 = 1_700_000_000_000;

describeRedis("redis store", () => {
  storeContract("redis", async () => {
    const client = newRedisClient();
    const driver = await createRedisStore({ client, prefix: randomPrefix("redis"), logger: silentLogger() });
    const cleanup = async () => {
      await driver.close();
      await unlinkMatching(client, driver.keys.pattern());
      await client.quit();
    };
    return { driver, cleanup };
  });

  // the composition root may configure its client differently: RESP3 map/double reply shapes
  storeContract("redis (client with RESP3 reply mapping)", async () => {
    const client = new Redis(REDIS_URL, { replyMapping: "resp3" });
    const driver = await createRedisStore({ client, prefix: randomPrefix("redis"), logger: silentLogger() });
    const cleanup = async () => {
      await driver.close();
      await unlinkMatching(client, driver.keys.pattern());
      await client.quit();
    };
    return { driver, cleanup };
  });

  // ---------------------------------------------------------------- redis-only behaviour

  const clients: Redis[] = [];
  const prefixes = new Set<string>();
  const stores: RedisStore[] = [];
  let admin: Redis;

  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    admin ??= newRedisClient();
    for (const p of prefixes) await unlinkMatching(admin, new RedisKeys(p).pattern());
    prefixes.clear();
  });
  afterAll(async () => {
    await Promise.all(clients.splice(0).map((c) => c.quit()));
    await admin?.quit();
  });

  function client(): Redis {
    const c = newRedisClient();
    clients.push(c);
    return c;
  }

  async function open(over: Partial<RedisStoreOptions> = {}): Promise<RedisStore> {
    const prefix = over.prefix ?? randomPrefix("redis");
    prefixes.add(prefix);
    const s = await createRedisStore({
      client: over.client ?? client(),
      prefix,
      logger: silentLogger(),
      ...over,
    });
    stores.push(s);
    return s;
  }

  function entry(key: string, over: Partial<SessionEntry> = {}): SessionEntry {
    return { key, sessionId: randomUUID(), agentId: "main", createdAt: T0, updatedAt: T0, ...over };
  }

  async function storeKeys(c: Redis, s: RedisStore): Promise<string[]> {
    const out: string[] = [];
    let cursor = "0";
    do {
      const [next, found] = await c.scan(cursor, "MATCH", s.keys.pattern(), "COUNT", 1000);
      out.push(...found);
      cursor = next;
    } while (cursor !== "0");
    return out.sort();
  }

  // ---------------------------------------------------------------- keys

  it("key builder: pinned strings, and every key parses back to what built it", () => {
    const k = new RedisKeys("sb");
    expect(k.session("agent:main:telegram:group:-100")).toBe("{sb}:sess:agent:main:telegram:group:-100");
    expect(k.sessionIdIndex()).toBe("{sb}:idx:sid");
    expect(k.allSessions(false)).toBe("{sb}:idx:live");
    expect(k.allSessions(true)).toBe("{sb}:idx:arch");
    expect(k.agentSessions("main", false)).toBe("{sb}:idx:agent:live:main");
    expect(k.transcript("main", "abc")).toBe("{sb}:tr:main:abc");
    expect(k.transcript("a:b%", "x:y")).toBe("{sb}:tr:a%3Ab%25:x%3Ay");
    expect(k.archivedTranscript("main", "abc", "deleted", "17")).toBe("{sb}:tr:main:abc:archived:deleted:17");
    expect(k.run("r1")).toBe("{sb}:run:r1");
    expect(k.outbox("o:1")).toBe("{sb}:outbox:o:1");
    expect(k.kv("bindings")).toBe("{sb}:kv:bindings");

    const odd = ["plain", "a:b:c", "100%", "%3A", "%253A", "{x}", "sp ace", ":", "archived"];
    const cases: Array<[string, ParsedKey]> = [];
    for (const s of odd) {
      cases.push(
        [k.session(s), { type: "session", sessionKey: s }],
        [k.agentSessions(s, true), { type: "agentSessions", agentId: s, archived: true }],
        [k.agentSessions(s, false), { type: "agentSessions", agentId: s, archived: false }],
        [k.labelIndex(s), { type: "labelIndex", label: s }],
        [k.parentIndex(s), { type: "parentIndex", spawnedBy: s }],
        [k.run(s), { type: "run", runId: s }],
        [k.sessionRuns(s), { type: "sessionRuns", sessionKey: s }],
        [k.outbox(s), { type: "outbox", id: s }],
        [k.kv(s), { type: "kv", namespace: s }],
      );
      for (const t of odd) {
        cases.push([k.transcript(s, t), { type: "transcript", agentId: s, sessionId: t }]);
        cases.push([
          k.archivedTranscript(s, t, "archived", "1700000000000-1"),
          {
            type: "archivedTranscript",
            agentId: s,
            sessionId: t,
            reason: "archived",
            stamp: "1700000000000-1",
          },
        ]);
      }
    }
    cases.push([k.sessionIdIndex(), { type: "sessionIdIndex" }]);
    cases.push([k.allSessions(true), { type: "allSessions", archived: true }]);
    for (const [key, parsed] of cases) {
      expect(key.startsWith("{sb}:")).toBe(true);
      expect(k.parse(key)).toEqual(parsed);
    }
    // transcripts of different refs never share a key, whatever the ids contain
    const streams = new Set(odd.flatMap((s) => odd.map((t) => k.transcript(s, t))));
    expect(streams.size).toBe(odd.length * odd.length);
    expect(k.parse("{other}:sess:x")).toBeNull();
    expect(k.parse("{sb}:nope")).toBeNull();
  });

  it("key builder: refuses prefixes that would break the hash tag; the scan pattern escapes globs", async () => {
    for (const bad of ["", "a{b", "a}b", "a b"]) expect(() => new RedisKeys(bad)).toThrow(/prefix/);
    expect(new RedisKeys("p*x?[y]").pattern()).toBe("{p\\*x\\?\\[y\\]}:*");
    await expect(
      createRedisStore({ client: client(), prefix: "{x}", logger: silentLogger() }),
    ).rejects.toMatchObject({ code: "CONFIG", message: expect.stringContaining("prefix") });
  });

  it("every key a store writes carries its hash tag (one Cluster slot)", async () => {
    const c = client();
    const s = await open({ client: c });
    await s.sessions.put(entry("agent:main:x", { label: "l", spawnedBy: "agent:main:main" }));
    await s.transcripts.append({ agentId: "main", sessionId: "s1" }, msg("m1", "user"));
    await s.runs.put({
      runId: "r1",
      sessionKey: "agent:main:x",
      agentId: "main",
      status: "queued",
      createdAt: T0,
    });
    await s.outbox.claim("o1", 60_000);
    await s.kv.set("ns", "k", 1);
    const keys = await storeKeys(c, s);
    // 11 + the transcript's id set (append dedupe)
    expect(keys.length).toBe(12);
    for (const key of keys) {
      expect(key.startsWith(`${s.keys.tag}:`)).toBe(true);
      expect(s.keys.parse(key)).not.toBeNull();
    }
  });

  // ---------------------------------------------------------------- sessions

  it("delete leaves no key behind, and index moves leave no stale members", async () => {
    const c = client();
    const s = await open({ client: c });
    const e = entry("k1", { label: "a", spawnedBy: "p1" });
    await s.sessions.put(e);
    await s.sessions.patch("k1", { label: "b", spawnedBy: "p2", agentId: "research", archivedAt: T0 + 1 });
    const k = s.keys;
    expect(await c.zscore(k.labelIndex("a"), "k1")).toBeNull();
    expect(await c.zscore(k.parentIndex("p1"), "k1")).toBeNull();
    expect(await c.zscore(k.agentSessions("main", false), "k1")).toBeNull();
    expect(await c.zscore(k.allSessions(false), "k1")).toBeNull();
    expect(await c.zscore(k.agentSessions("research", true), "k1")).toBe(String(T0));
    expect(await c.zscore(k.labelIndex("b"), "k1")).toBe(String(T0));
    expect(await s.sessions.list({ agentId: "research", includeArchived: true })).toHaveLength(1);
    expect(await s.sessions.delete("k1")).toBe(true);
    expect(await storeKeys(c, s)).toEqual([]);
  });

  it("an update keeps its indexes (scores move); a new sessionId drops the old one's lookup", async () => {
    const c = client();
    const s = await open({ client: c });
    const first = randomUUID();
    await s.sessions.put(entry("k1", { sessionId: first, label: "a", spawnedBy: "p1" }));
    await s.sessions.patch("k1", { displayName: "renamed", updatedAt: T0 + 5 });
    const k = s.keys;
    expect(await c.zscore(k.labelIndex("a"), "k1")).toBe(String(T0 + 5));
    expect(await c.zscore(k.parentIndex("p1"), "k1")).toBe(String(T0 + 5));
    expect(await c.zscore(k.allSessions(false), "k1")).toBe(String(T0 + 5));
    expect((await s.sessions.getBySessionId(first))?.key).toBe("k1");
    const second = randomUUID(); // a reset: same key, new transcript
    await s.sessions.patch("k1", { sessionId: second });
    expect(await s.sessions.getBySessionId(first)).toBeNull();
    expect((await s.sessions.getBySessionId(second))?.key).toBe("k1");
    expect(await c.hlen(k.sessionIdIndex())).toBe(1);
  });

  it("sessionId lookup: a stale duplicate's delete does not drop the newer owner's mapping", async () => {
    const s = await open();
    const sid = randomUUID();
    await s.sessions.put(entry("old", { sessionId: sid }));
    await s.sessions.put(entry("new", { sessionId: sid }));
    expect((await s.sessions.getBySessionId(sid))?.key).toBe("new");
    await s.sessions.delete("old");
    expect((await s.sessions.getBySessionId(sid))?.key).toBe("new");
  });

  it("update is atomic across two clients (two processes) on the same prefix", async () => {
    const prefix = randomPrefix("redis");
    const a = await open({ prefix, client: client() });
    const b = await open({ prefix, client: client() });
    await a.sessions.put(entry("k1", { totalTokens: 0, inputTokens: 0 }));
    const inc = (s: RedisStore) =>
      s.sessions.update("k1", (cur) => ({ ...cur!, totalTokens: (cur!.totalTokens ?? 0) + 1 }));
    const ops: Array<Promise<unknown>> = [];
    for (let i = 0; i < 30; i++) {
      ops.push(inc(a), inc(b));
      ops.push(b.sessions.patch("k1", { displayName: `d${i}` }));
    }
    await Promise.all(ops);
    const got = (await a.sessions.get("k1"))!;
    expect(got.totalTokens).toBe(60);
    expect(got.displayName).toMatch(/^d\d+$/);
    expect(await b.sessions.count()).toBe(1);
  });

  it("putSession-6 refuses a stale revision; deleteSession-2 reports an absent entry", async () => {
    const c = client();
    const s = await open({ client: c });
    const runner = new ScriptRunner(c);
    await s.sessions.put(entry("k1"));
    const k = s.keys;
    const rev = await c.hget(k.session("k1"), "rev");
    const keys = [k.session("k1"), k.sessionIdIndex(), k.allSessions(false), k.agentSessions("main", false)];
    const stale = await runner.run(
      putSession,
      [...keys, keys[0]!, keys[0]!],
      ["k1", "{}", T0, "sid", "7", "0", "0"],
    );
    expect(stale).toBe(-1);
    expect(await c.hget(k.session("k1"), "rev")).toBe(rev);
    expect(await runner.run(deleteSession, [k.session("nope"), k.sessionIdIndex()], ["nope"])).toBe(0);
  });

  /** Commands `c` sends while `fn` runs (ioredis sendCommand), by name. */
  async function commandsDuring(c: Redis, fn: () => Promise<unknown>): Promise<string[]> {
    const spy = vi.spyOn(c, "sendCommand");
    try {
      await fn();
      return spy.mock.calls.map(([cmd]) => (cmd as { name: string }).name);
    } finally {
      spy.mockRestore();
    }
  }

  it("a patch after this process's own read or write is one script, no read; another process's write in between still wins", async () => {
    const ca = client();
    const a = await open({ client: ca });
    const b = await open({ client: client(), prefix: a.keys.prefix });
    await a.sessions.put(entry("k1"));
    expect(await commandsDuring(ca, () => a.sessions.patch("k1", { model: "m1" }))).toEqual(["evalsha"]);
    // B writes behind A's back: A's first try is refused, it reads and merges onto B's write
    await b.sessions.patch("k1", { label: "from-b" });
    const sent = await commandsDuring(ca, () => a.sessions.patch("k1", { lastModel: "m2" }));
    expect(sent).toEqual(["evalsha", "hmget", "evalsha"]);
    expect(await b.sessions.get("k1")).toMatchObject({ model: "m1", label: "from-b", lastModel: "m2" });

    // runs: queued by A, marked running by B, finished by A: nothing B wrote is lost
    const run = { runId: randomUUID(), sessionKey: "k1", agentId: "main", createdAt: T0 };
    await a.runs.put({ ...run, status: "queued" });
    expect(await commandsDuring(ca, () => a.runs.patch(run.runId, { status: "running" }))).toEqual([
      "evalsha",
    ]);
    await b.runs.patch(run.runId, { startedAt: T0 + 1 });
    await a.runs.patch(run.runId, { status: "ok", endedAt: T0 + 2 });
    expect(await b.runs.get(run.runId)).toMatchObject({ status: "ok", startedAt: T0 + 1, endedAt: T0 + 2 });
  });

  it("a process that never saw a run patches it against the record as its first writer stored it: one script, no read; a stale or wrong guess still merges onto what is stored", async () => {
    const a = await open();
    const cb = client();
    const fresh = () => open({ client: cb, prefix: a.keys.prefix });
    const queued = {
      runId: randomUUID(),
      sessionKey: "k1",
      agentId: "main",
      createdAt: T0,
      status: "queued" as const,
    };
    await a.runs.put(queued);
    // B (a worker) knows nothing of the run but can rebuild the queued record exactly
    const b = await fresh();
    expect(
      await commandsDuring(cb, () =>
        b.runs.patch(queued.runId, { status: "running", startedAt: T0 + 1 }, queued),
      ),
    ).toEqual(["evalsha"]);
    expect(await a.runs.get(queued.runId)).toMatchObject({ status: "running", startedAt: T0 + 1 });

    // the record moved on since: the guess is refused, the patch reads and merges onto it
    const c = await fresh();
    const sent = await commandsDuring(cb, () => c.runs.patch(queued.runId, { endedAt: T0 + 2 }, queued));
    expect(sent).toEqual(["evalsha", "hmget", "evalsha"]);
    expect(await a.runs.get(queued.runId)).toMatchObject({
      status: "running",
      startedAt: T0 + 1,
      endedAt: T0 + 2,
    });

    // a guess of a record that does not exist writes nothing
    const d = await fresh();
    const ghost = { ...queued, runId: randomUUID() };
    expect(await d.runs.patch(ghost.runId, { status: "running" }, ghost)).toBeNull();
    expect(await a.runs.get(ghost.runId)).toBeNull();
    // nor does a guess that differs from what is stored in any field
    const other = { ...queued, runId: randomUUID() };
    await a.runs.put(other);
    const e = await fresh();
    await e.runs.patch(other.runId, { status: "running" }, { ...other, agentId: "elsewhere" });
    expect(await a.runs.get(other.runId)).toMatchObject({ agentId: "main", status: "running" });
  });

  it("a key deleted and created again never repeats a revision: a writer that knew its earlier life re-reads", async () => {
    const a = await open();
    const b = await open({ client: client(), prefix: a.keys.prefix });
    const first = entry("k1");
    await a.sessions.put(first);
    await b.sessions.delete("k1");
    const second = entry("k1");
    await b.sessions.put(second);
    // A's known revision is the first life's: the same count of writes must not make it current again
    const patched = await a.sessions.patch("k1", { label: "after" });
    expect(patched?.sessionId).toBe(second.sessionId);
    expect((await b.sessions.get("k1"))?.sessionId).toBe(second.sessionId);
  });

  it("a script missing from the server cache runs through the EVAL fallback", async () => {
    const runner = new ScriptRunner(client());
    const fresh = { name: "probe-0", numberOfKeys: 0, lua: `return "${randomUUID()}"` };
    const r = await runner.run(fresh, [], []);
    expect(typeof r).toBe("string");
    expect(await runner.run(fresh, [], [])).toBe(r); // now cached: EVALSHA
  });

  it("list walks the index in pages and stops at the limit", async () => {
    const c = client();
    const s = await open({ client: c });
    for (let i = 0; i < 300; i++) {
      const key = i % 2 ? `agent:main:telegram:group:${i}` : `agent:main:direct:u${i}`;
      await s.sessions.put(entry(key, { updatedAt: T0 + i }));
    }
    const spy = vi.spyOn(c, "zrevrangebyscore");
    const rows = await s.sessions.list({ kinds: ["group"], limit: 5 });
    expect(rows.map((e) => e.key)).toEqual(
      [299, 297, 295, 293, 291].map((i) => `agent:main:telegram:group:${i}`),
    );
    expect(spy).toHaveBeenCalledTimes(1);
    spy.mockClear();
    // a filter that matches nothing walks everything, page by page (growing), and finds nothing
    expect(await s.sessions.list({ search: "nothing-matches", limit: 10 })).toEqual([]);
    expect(spy.mock.calls.length).toBeGreaterThan(1);
    expect(spy.mock.calls.length).toBeLessThan(10);
    spy.mockRestore();
  });

  it("includeArchived merges the live and archived indexes in order", async () => {
    const s = await open();
    const expected: string[] = [];
    for (let i = 0; i < 120; i++) {
      const t = T0 + Math.floor(i / 2); // pairs share a timestamp: ties order by key, descending
      await s.sessions.put(
        entry(`k${String(i).padStart(3, "0")}`, { updatedAt: t, archivedAt: i % 3 ? undefined : t }),
      );
      expected.push(`k${String(i).padStart(3, "0")}`);
    }
    expected.reverse();
    expect((await s.sessions.list({ includeArchived: true, limit: 200 })).map((e) => e.key)).toEqual(
      expected,
    );
    expect((await s.sessions.list({ includeArchived: true, limit: 7 })).map((e) => e.key)).toEqual(
      expected.slice(0, 7),
    );
    expect(await s.sessions.list({ limit: 200 })).toHaveLength(80);
    expect(await s.sessions.count()).toBe(120);
  });

  // ---------------------------------------------------------------- transcripts

  function msg(id: string, role: TranscriptMessage["role"]): TranscriptMessage {
    return { id, sessionId: "s1", role, content: `c-${id}`, timestamp: T0 };
  }

  /** Two stores on one prefix (two processes): `a` on client `cA`, with `n` messages m0… appended. */
  async function twoProcesses(n: number) {
    const prefix = randomPrefix("redis");
    const cA = client();
    const a = await open({ client: cA, prefix });
    const b = await open({ prefix });
    const ref: TranscriptRef = { agentId: "main", sessionId: randomUUID() };
    await a.transcripts.appendBatch(
      ref,
      Array.from({ length: n }, (_, i) => msg(`m${i}`, "user")),
    );
    return { cA, a, b, ref };
  }

  it("readTail reads only from the end of a long stream (tail cache off)", async () => {
    const c = client();
    const s = await open({ client: c, tailCacheChars: 0 });
    const ref: TranscriptRef = { agentId: "main", sessionId: randomUUID() };
    const roles: TranscriptMessage["role"][] = ["user", "assistant", "toolCall", "toolResult"];
    const all = Array.from({ length: 5000 }, (_, i) => msg(`m${i}`, roles[i % 4]!));
    // the last 600 messages are tool traffic only
    for (let i = 4400; i < 5000; i++) all[i] = msg(`m${i}`, i % 2 ? "toolResult" : "toolCall");
    for (let i = 0; i < all.length; i += 1000) await s.transcripts.appendBatch(ref, all.slice(i, i + 1000));
    expect(await s.transcripts.count(ref)).toBe(5000);

    const fetched: number[] = [];
    const real = c.xrevrange.bind(c);
    const spy = vi.spyOn(c, "xrevrange").mockImplementation(async (...args: unknown[]) => {
      const page = await (real as (...a: unknown[]) => Promise<unknown[]>)(...args);
      fetched.push(page.length);
      return page as never;
    });

    const tail = await s.transcripts.readTail(ref, { limit: 10, includeTools: true });
    expect(tail.map((m) => m.id)).toEqual(all.slice(-10).map((m) => m.id));
    expect(fetched).toEqual([10]);

    fetched.length = 0;
    const noTools = await s.transcripts.readTail(ref, { limit: 4 });
    expect(noTools.map((m) => m.id)).toEqual(["m4392", "m4393", "m4396", "m4397"]);
    const total = fetched.reduce((a, b) => a + b, 0);
    expect(total).toBeGreaterThanOrEqual(608); // had to page past the 600 tool messages
    expect(total).toBeLessThan(1500); // …but read nowhere near the whole stream
    expect(fetched.length).toBeGreaterThan(1);
    spy.mockRestore();
  });

  it("a cached tail fetches only what was added since, by any process, and is dropped when the stream is not the one cached", async () => {
    const { cA, a, b, ref } = await twoProcesses(50);
    const ids = async (limit: number) =>
      (await a.transcripts.readTail(ref, { limit, includeTools: true })).map((m) => m.id);
    expect(await ids(10)).toEqual(Array.from({ length: 10 }, (_, i) => `m${40 + i}`));

    const fetched: number[] = [];
    // the page sizes streamTail-1 (a page and the stream's length, in one step) brought back
    const realEvalsha = cA.evalsha.bind(cA);
    // only streamTail-1's calls: the store's other scripts on this client are not counted
    const tailSha = createHash("sha1").update(streamTail.lua).digest("hex");
    const spy = vi.spyOn(cA, "evalsha").mockImplementation((async (...args: unknown[]) => {
      const res = await (realEvalsha as (...x: unknown[]) => Promise<unknown>)(...args);
      if (args[0] === tailSha && Array.isArray(res) && Array.isArray(res[0])) fetched.push(res[0].length);
      return res;
    }) as never);
    const multi = vi.spyOn(cA, "multi");

    // another process appends: the next read fetches those two entries, not the window
    await b.transcripts.append(ref, msg("b1", "assistant"));
    await b.transcripts.append(ref, msg("b2", "user"));
    expect(await ids(5)).toEqual(["m47", "m48", "m49", "b1", "b2"]);
    expect(fetched).toEqual([2]);
    fetched.length = 0;
    expect(await ids(5)).toEqual(["m47", "m48", "m49", "b1", "b2"]);
    expect(fetched).toEqual([0]);

    // archived elsewhere and started again under the same key: nothing of the old stream is served
    fetched.length = 0;
    await b.transcripts.archive(ref, "archived");
    await b.transcripts.append(ref, msg("n1", "user"));
    expect(await ids(5)).toEqual(["n1"]);
    // the check (length mismatch), then a fresh read. The check brings back n1 only when its id
    // sorts after b2's: a stream made again within the same millisecond starts its ids lower
    expect(fetched).toHaveLength(2);
    expect(fetched[0]).toBeLessThanOrEqual(1);
    expect(fetched[1]).toBe(1);
    expect(multi).not.toHaveBeenCalled(); // one script call each, no MULTI/EXEC (4 commands) per read
    spy.mockRestore();
    multi.mockRestore();

    // copies unless read-only: mutating a result does not reach the cache
    const got = await a.transcripts.readTail(ref, { limit: 1, includeTools: true });
    got[0]!.content = "changed";
    expect((await a.transcripts.readTail(ref, { limit: 1, includeTools: true }))[0]!.content).toBe("c-n1");
  });

  it("an append to a cached tail brings it up to date in its reply: the read right after it (afterAppend) asks Redis nothing", async () => {
    const { cA, a, b, ref } = await twoProcesses(10);
    const read = async (afterAppend: boolean) =>
      (await a.transcripts.readTail(ref, { limit: 4, includeTools: true, readOnly: true, afterAppend })).map(
        (m) => m.id,
      );
    expect(await read(false)).toEqual(["m6", "m7", "m8", "m9"]); // the tail is cached now
    const sent: string[] = [];
    const realSend = cA.sendCommand.bind(cA);
    const spy = vi.spyOn(cA, "sendCommand").mockImplementation(((
      cmd: { name: string },
      ...rest: unknown[]
    ) => {
      sent.push(cmd.name);
      return (realSend as (...x: unknown[]) => unknown)(cmd, ...rest);
    }) as never);
    try {
      // another process appends; then this one: its append's reply carries b1, b2 along
      await b.transcripts.append(ref, msg("b1", "assistant"));
      await b.transcripts.append(ref, msg("b2", "user"));
      expect(await a.transcripts.append(ref, msg("a1", "user"))).toBe(true);
      expect(sent).toEqual(["evalsha"]);
      expect(await read(true)).toEqual(["m9", "b1", "b2", "a1"]);
      expect(sent).toEqual(["evalsha"]); // no round trip for the read
      // a read not right after an append checks with Redis: one script
      expect(await read(false)).toEqual(["m9", "b1", "b2", "a1"]);
      expect(sent).toHaveLength(2);

      // what another process appends after this one's append: a read afterAppend is as of that
      // append; the next plain read sees it (and so does the next append's reply)
      await b.transcripts.append(ref, msg("b3", "user"));
      expect(await read(false)).toEqual(["b1", "b2", "a1", "b3"]);
      await b.transcripts.append(ref, msg("b4", "user"));
      await a.transcripts.append(ref, msg("a2", "user"));
      sent.length = 0;
      expect(await read(true)).toEqual(["a1", "b3", "b4", "a2"]);
      expect(sent).toEqual([]);

      // appends in flight together: the read after them waits for neither and misses none
      await Promise.all([
        a.transcripts.append(ref, msg("a3", "user")),
        a.transcripts.append(ref, msg("a4", "user")),
      ]);
      expect(await read(true)).toEqual(["b4", "a2", "a3", "a4"]);
      // a read racing an append on the same stream: both land, the next reads agree
      const [racing] = await Promise.all([read(false), a.transcripts.append(ref, msg("a5", "user"))]);
      expect([
        ["b4", "a2", "a3", "a4"],
        ["a2", "a3", "a4", "a5"],
      ]).toContainEqual(racing); // before or after the append
      expect(await read(false)).toEqual(["a2", "a3", "a4", "a5"]);
      await a.transcripts.append(ref, msg("a6", "user"));
      expect(await read(true)).toEqual(["a3", "a4", "a5", "a6"]);

      // an append of a known id adds nothing and confirms nothing: the read after it asks Redis
      await b.transcripts.append(ref, msg("b5", "user"));
      expect(await a.transcripts.append(ref, msg("a6", "user"))).toBe(false);
      sent.length = 0;
      expect(await read(true)).toEqual(["a4", "a5", "a6", "b5"]);
      expect(sent).toEqual(["evalsha"]);

      // archived elsewhere and started again: the append's reply does not fit the tail (length),
      // so nothing of the old stream is served
      await b.transcripts.archive(ref, "archived");
      await b.transcripts.append(ref, msg("n1", "user"));
      await a.transcripts.append(ref, msg("n2", "user"));
      expect(await read(true)).toEqual(["n1", "n2"]);
    } finally {
      spy.mockRestore();
    }
    // the cache hands out copies unless read-only, also of a message it took from an append
    const got = await a.transcripts.readTail(ref, { limit: 1, includeTools: true, afterAppend: true });
    got[0]!.content = "changed";
    expect((await a.transcripts.readTail(ref, { limit: 1, includeTools: true }))[0]!.content).toBe("c-n2");
  });

  it("cached and uncached reads agree over random appends, reads and archives from three processes", async () => {
    const prefix = randomPrefix("redis");
    const cached = [await open({ prefix }), await open({ prefix, tailCacheChars: 600 })]; // the second one keeps ~6 messages
    const plain = await open({ prefix, tailCacheChars: 0 });
    const writers = [...cached, plain];
    const ref: TranscriptRef = { agentId: "main", sessionId: randomUUID() };
    const roles: TranscriptMessage["role"][] = ["user", "assistant", "toolCall", "toolResult"];
    let seed = 11;
    const random = () => {
      seed = (seed * 1664525 + 1013904223) >>> 0;
      return seed / 2 ** 32;
    };
    for (let i = 0; i < 300; i++) {
      const r = random();
      if (r < 0.5) {
        const w = writers[Math.floor(random() * writers.length)]!;
        await w.transcripts.append(ref, msg(`x${i}`, roles[Math.floor(random() * 4)]!));
        if (random() < 0.5) {
          // the writer reads right after its own append, as a turn reads its window
          const limit = 1 + Math.floor(random() * 30);
          const want = (await plain.transcripts.readTail(ref, { limit, includeTools: true })).map(
            (m) => m.id,
          );
          const got = await w.transcripts.readTail(ref, { limit, includeTools: true, afterAppend: true });
          expect(
            got.map((m) => m.id),
            `op ${i}: afterAppend, limit ${limit}`,
          ).toEqual(want);
        }
      } else if (r < 0.52) {
        await writers[Math.floor(random() * writers.length)]!.transcripts.archive(ref, "archived", {
          at: T0 + i,
        });
      } else {
        const limit = 1 + Math.floor(random() * 30);
        const includeTools = random() < 0.7;
        const want = (await plain.transcripts.readTail(ref, { limit, includeTools })).map((m) => m.id);
        for (const s of cached) {
          const got = (await s.transcripts.readTail(ref, { limit, includeTools, readOnly: true })).map(
            (m) => m.id,
          );
          expect(got, `op ${i}: limit ${limit}, tools ${includeTools}`).toEqual(want);
        }
      }
    }
  });

  it("archive keeps the stream under a new name; two archives in one millisecond both survive", async () => {
    const c = client();
    const s = await open({ client: c, now: () => T0 });
    const ref: TranscriptRef = { agentId: "main", sessionId: randomUUID() };
    await s.transcripts.append(ref, msg("a", "user"));
    const first = await s.transcripts.archive(ref, "archived");
    await s.transcripts.append(ref, msg("b", "user"));
    const second = await s.transcripts.archive(ref, "archived");
    expect(first).toBe(s.keys.archivedTranscript(ref.agentId, ref.sessionId, "archived", String(T0)));
    expect(second).toBe(`${first}-1`);
    expect(await c.xlen(first!)).toBe(1);
    expect(await c.xlen(second!)).toBe(1);
    expect(await c.exists(s.transcripts.locate(ref))).toBe(0);
  });

  // ---------------------------------------------------------------- runs

  it("finished runs expire after finishedRunTtlMs; listBySession drops expired ones from its index", async () => {
    const c = client();
    const s = await open({ client: c, finishedRunTtlMs: 60_000 });
    const base = { sessionKey: "agent:main:main", agentId: "main", createdAt: T0 } as const;
    await s.runs.put({ ...base, runId: "r1", status: "running" });
    expect(await c.pttl(s.keys.run("r1"))).toBe(-1);
    await s.runs.patch("r1", { status: "ok" });
    const ttl = await c.pttl(s.keys.run("r1"));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    await s.runs.put({ ...base, runId: "r2", status: "queued", createdAt: T0 + 1 });
    await c.del(s.keys.run("r1")); // as if it had expired
    expect((await s.runs.listBySession(base.sessionKey, 10)).map((r) => r.runId)).toEqual(["r2"]);
    expect(await c.zrange(s.keys.sessionRuns(base.sessionKey), "0", "-1")).toEqual(["r2"]);

    const keep = await open({ client: c, finishedRunTtlMs: 0 });
    await keep.runs.put({ ...base, runId: "r3", status: "ok" });
    expect(await c.pttl(keep.keys.run("r3"))).toBe(-1);
  });

  it("a run moved to another session leaves the old session's list", async () => {
    const s = await open();
    await s.runs.put({ runId: "r1", sessionKey: "a", agentId: "main", status: "queued", createdAt: T0 });
    await s.runs.patch("r1", { sessionKey: "b" });
    expect(await s.runs.listBySession("a", 10)).toEqual([]);
    expect((await s.runs.listBySession("b", 10)).map((r) => r.runId)).toEqual(["r1"]);
  });

  // ---------------------------------------------------------------- lifecycle

  it("close leaves the handed-in client open and refuses further store calls", async () => {
    const c = client();
    const s = await open({ client: c });
    await s.sessions.put(entry("k1"));
    await s.close();
    await s.close(); // idempotent
    expect(c.status).toBe("ready");
    expect(await c.ping()).toBe("PONG");
    await expect(s.sessions.get("k1")).rejects.toBeInstanceOf(SwitchboardError);
    await expect(
      s.transcripts.append({ agentId: "main", sessionId: "x" }, msg("m", "user")),
    ).rejects.toMatchObject({
      code: "UNAVAILABLE",
    });
  });
});
