import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../../src/log.js";
import { createFsStore, type FsStore, type FsStoreOptions } from "../../../../src/store/fs/index.js";
import type { TranscriptMessage, TranscriptRef } from "../../../../src/store/types.js";
import { tempDir } from "../../../helpers.js";

// The turn hot path of the fs store: the in-memory tail cache, the append-handle LRU and the
// journals' per-tick batching. Every read here is checked against what the file itself says.

const dirs: Array<() => void> = [];
const stores: FsStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  for (const c of dirs.splice(0)) c();
});

async function open(stateDir?: string, extra: Partial<FsStoreOptions> = {}): Promise<FsStore> {
  let dir = stateDir;
  if (!dir) {
    const t = tempDir("sb-fs-hot-");
    dirs.push(t.cleanup);
    dir = t.dir;
  }
  const s = await createFsStore({ stateDir: dir, logger: silentLogger(), ...extra });
  stores.push(s);
  return s;
}

async function reopen(s: FsStore, extra: Partial<FsStoreOptions> = {}): Promise<FsStore> {
  await s.close();
  return open(s.stateDir, extra);
}

const ref = (sessionId: string): TranscriptRef => ({ agentId: "main", sessionId });
const ROLES = ["user", "assistant", "toolCall", "toolResult"] as const;

function message(id: string, i: number, sessionId = "s1"): TranscriptMessage {
  const role = ROLES[i % ROLES.length]!;
  return {
    id,
    sessionId,
    role,
    content: role === "toolCall" ? { arguments: { q: `q${i}`, nested: [i, { deep: true }] } } : `text ${i}`,
    timestamp: 1_700_000_000_000 + i,
    ...(role === "assistant" ? { usage: { input: i, output: 1 }, model: "s/m" } : {}),
  };
}

/** Every message in the file, parsed line by line (the ground truth). */
function fileMessages(s: FsStore, r: TranscriptRef): TranscriptMessage[] {
  return readFileSync(s.transcripts.locate(r), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TranscriptMessage);
}

function expectedTail(all: TranscriptMessage[], limit: number, includeTools: boolean): TranscriptMessage[] {
  const kept = includeTools ? all : all.filter((m) => m.role !== "toolCall" && m.role !== "toolResult");
  return kept.slice(Math.max(0, kept.length - limit));
}

const READS = [
  { limit: 1, includeTools: false },
  { limit: 5, includeTools: true },
  { limit: 7, includeTools: false },
  { limit: 400, includeTools: true },
  { limit: 400, includeTools: false },
];

describe("fs transcripts: tail cache", () => {
  it("serves reads after appends from memory, equal to the file's own tail", async () => {
    const s = await open();
    for (let i = 0; i < 30; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    const bytesBefore = s.transcripts.readStats().tailBytesRead;
    const hitsBefore = s.transcripts.cacheStats().hits;
    const all = fileMessages(s, ref("s1"));
    expect(all).toHaveLength(30);
    for (const o of READS) {
      expect(await s.transcripts.readTail(ref("s1"), o)).toEqual(expectedTail(all, o.limit, o.includeTools));
    }
    expect(s.transcripts.readStats().tailBytesRead).toBe(bytesBefore);
    expect(s.transcripts.cacheStats().hits - hitsBefore).toBe(READS.length);
  });

  it("fills from a cold read of the file, then follows appends without reading it again", async () => {
    let s = await open();
    for (let i = 0; i < 20; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    s = await reopen(s);
    const cold = await s.transcripts.readTail(ref("s1"), { limit: 400, includeTools: true });
    expect(cold.map((m) => m.id)).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
    const afterCold = s.transcripts.readStats().tailBytesRead;
    expect(afterCold).toBeGreaterThan(0);

    await s.transcripts.append(ref("s1"), message("m20", 20));
    const all = fileMessages(s, ref("s1"));
    for (const o of READS) {
      expect(await s.transcripts.readTail(ref("s1"), o)).toEqual(expectedTail(all, o.limit, o.includeTools));
    }
    expect(s.transcripts.readStats().tailBytesRead).toBe(afterCold);
    // one fill: the cold read; the appends and reads after it were served from memory
    expect(s.transcripts.cacheStats()).toMatchObject({ files: 1, fills: 1, maxChars: 12 * 1024 * 1024 });
  });

  it("counts a fill when an append to a transcript it does not hold reads the file's tail (the id check)", async () => {
    let s = await open();
    for (let i = 0; i < 10; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    expect(s.transcripts.cacheStats().fills).toBe(0); // a new file starts as a known-empty entry
    s = await reopen(s);
    await s.transcripts.append(ref("s1"), message("m10", 10));
    const stats = s.transcripts.cacheStats();
    expect(stats).toMatchObject({ fills: 1, misses: 0 });
    await s.transcripts.readTail(ref("s1"), { limit: 400, includeTools: true });
    expect(s.transcripts.cacheStats()).toMatchObject({ fills: 1, hits: stats.hits + 1 });
  });

  it("goes back to the file when the cached suffix is too short for the read", async () => {
    let s = await open();
    for (let i = 0; i < 40; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    s = await reopen(s);
    // a small cold read caches only the few lines it scanned
    expect(
      (await s.transcripts.readTail(ref("s1"), { limit: 2, includeTools: true })).map((m) => m.id),
    ).toEqual(["m38", "m39"]);
    const bytes = s.transcripts.readStats().tailBytesRead;
    const all = fileMessages(s, ref("s1"));
    expect(await s.transcripts.readTail(ref("s1"), { limit: 30, includeTools: false })).toEqual(
      expectedTail(all, 30, false),
    );
    expect(s.transcripts.readStats().tailBytesRead).toBeGreaterThan(bytes);
  });

  it("hands out copies: mutating a read never changes a later read", async () => {
    const s = await open();
    for (let i = 0; i < 4; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    const first = await s.transcripts.readTail(ref("s1"), { limit: 4, includeTools: true });
    (first[1]!.usage as { input: number }).input = 999;
    ((first[2]!.content as { arguments: { nested: unknown[] } }).arguments.nested as unknown[]).push("x");
    first[0]!.content = "changed";
    const again = await s.transcripts.readTail(ref("s1"), { limit: 4, includeTools: true });
    expect(again).toEqual(fileMessages(s, ref("s1")));
  });

  it("a readOnly read gets the cached messages themselves (no copies); a plain read still gets copies", async () => {
    const s = await open();
    for (let i = 0; i < 4; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    const opts = { limit: 4, includeTools: true, readOnly: true };
    const a = await s.transcripts.readTail(ref("s1"), opts);
    const b = await s.transcripts.readTail(ref("s1"), opts);
    expect(a).toEqual(fileMessages(s, ref("s1")));
    expect(a).not.toBe(b);
    for (let i = 0; i < 4; i++) expect(b[i]).toBe(a[i]);
    const copy = await s.transcripts.readTail(ref("s1"), { limit: 4, includeTools: true });
    expect(copy).toEqual(a);
    for (let i = 0; i < 4; i++) expect(copy[i]).not.toBe(a[i]);
  });

  it("keeps the message the caller appended private (later mutation of it is not seen)", async () => {
    const s = await open();
    const m = message("m0", 1);
    await s.transcripts.append(ref("s1"), m);
    (m.usage as { input: number }).input = 12345;
    m.content = "mutated after append";
    expect(await s.transcripts.readTail(ref("s1"), { limit: 1 })).toEqual(fileMessages(s, ref("s1")));
  });

  it("stays within its character bound and still answers every read correctly", async () => {
    const s = await open(undefined, { tailCacheChars: 2000 });
    const ids = ["a", "b", "c", "d", "e"];
    for (let i = 0; i < 60; i++) {
      const sid = ids[i % ids.length]!;
      await s.transcripts.append(ref(sid), message(`${sid}${i}`, i, sid));
      for (const o of READS.slice(0, 3)) {
        const got = await s.transcripts.readTail(ref(sid), o);
        expect(got).toEqual(expectedTail(fileMessages(s, ref(sid)), o.limit, o.includeTools));
      }
      expect(s.transcripts.cacheStats().chars).toBeLessThanOrEqual(2000);
    }
  });

  it("forgets an archived transcript: a new one under the same id starts empty", async () => {
    const s = await open();
    for (let i = 0; i < 3; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    expect(await s.transcripts.readTail(ref("s1"), { limit: 10, includeTools: true })).toHaveLength(3);
    expect(await s.transcripts.archive(ref("s1"), "archived")).not.toBeNull();
    expect(await s.transcripts.readTail(ref("s1"), { limit: 10, includeTools: true })).toEqual([]);
    await s.transcripts.append(ref("s1"), message("n0", 0));
    expect(
      (await s.transcripts.readTail(ref("s1"), { limit: 10, includeTools: true })).map((m) => m.id),
    ).toEqual(["n0"]);
  });

  it("can be turned off (tailCacheChars: 0): every read scans the file", async () => {
    const s = await open(undefined, { tailCacheChars: 0 });
    for (let i = 0; i < 10; i++) await s.transcripts.append(ref("s1"), message(`m${i}`, i));
    const before = s.transcripts.readStats().tailBytesRead;
    const all = fileMessages(s, ref("s1"));
    expect(await s.transcripts.readTail(ref("s1"), { limit: 3, includeTools: true })).toEqual(
      expectedTail(all, 3, true),
    );
    expect(s.transcripts.readStats().tailBytesRead).toBeGreaterThan(before);
    expect(s.transcripts.cacheStats()).toEqual({
      files: 0,
      chars: 0,
      maxChars: 0,
      hits: 0,
      misses: 0,
      fills: 0,
    });
  });
});

describe("fs transcripts: append handles", () => {
  it("keeps every file whole when more transcripts are used than handles may stay open", async () => {
    const s = await open(undefined, { maxOpenTranscripts: 2, tailCacheChars: 0 });
    const ids = ["a", "b", "c", "d", "e"];
    const expected = new Map<string, string[]>();
    const ops: Array<Promise<unknown>> = [];
    for (let i = 0; i < 100; i++) {
      const sid = ids[(i * 7) % ids.length]!;
      const id = `${sid}${i}`;
      expected.set(sid, [...(expected.get(sid) ?? []), id]);
      ops.push(s.transcripts.append(ref(sid), message(id, 0, sid)));
      if (i % 3 === 0) ops.push(s.transcripts.readTail(ref(sid), { limit: 2 }));
    }
    await Promise.all(ops);
    for (const sid of ids) {
      expect(fileMessages(s, ref(sid)).map((m) => m.id)).toEqual(expected.get(sid));
      expect((await s.transcripts.readTail(ref(sid), { limit: 100 })).map((m) => m.id)).toEqual(
        expected.get(sid),
      );
    }
  });
});

describe("fs journals: per-tick batching", () => {
  it("never strands a write or a compaction requested right after another write resolved", async () => {
    const s = await open(undefined, { compactEveryAppends: 5 });
    for (let i = 0; i < 60; i++) {
      await s.sessions.put({
        key: `k${i % 7}`,
        sessionId: `s${i % 7}`,
        agentId: "main",
        createdAt: 1,
        updatedAt: i,
      });
      // issued from the continuation of the resolved write, while its flush loop is finishing
      await s.runs.put({
        runId: `r${i}`,
        sessionKey: `k${i % 7}`,
        agentId: "main",
        status: "queued",
        createdAt: i,
      });
      await s.runs.patch(`r${i}`, { status: "ok", endedAt: i });
      if (i % 10 === 0) await s.compact();
    }
    expect(await s.sessions.count()).toBe(7);
    expect((await s.runs.get("r59"))?.status).toBe("ok");
    const again = await reopen(s);
    expect((await again.sessions.get("k3"))?.updatedAt).toBe(59);
    expect((await again.runs.get("r42"))?.endedAt).toBe(42);
  });

  it("lands every record of a burst of concurrent writes whole, one line each", async () => {
    const s = await open();
    const puts = Array.from({ length: 50 }, (_, i) =>
      s.sessions.put({ key: `k${i}`, sessionId: `s${i}`, agentId: "main", createdAt: 1, updatedAt: i }),
    );
    await Promise.all(puts);
    const lines = readFileSync(s.sessions.indexPath, "utf8").trim().split("\n");
    expect(lines).toHaveLength(51); // header + one line per entry, none torn or merged
    expect(await s.sessions.count()).toBe(50);
  });
});

describe("fs transcripts: where a transcript lives", () => {
  it("is layout.transcript's path, whatever form the state dir was given in", async () => {
    const t = tempDir("sb-fs-hot-");
    dirs.push(t.cleanup);
    const { layout } = await import("../../../../src/store/fs/paths.js");
    for (const form of [t.dir, `${t.dir}/`, `${t.dir}/./sub/../`, `${t.dir}//`]) {
      const s = await open(form);
      for (const r of [ref("s1"), { agentId: "ops", sessionId: "abc-1" }]) {
        const where = (s.transcripts as unknown as { locate(r: TranscriptRef): string }).locate(r);
        expect(where).toBe(layout.transcript(form, r.agentId, r.sessionId));
        await s.transcripts.append(r, message(`m-${r.sessionId}`, 0, r.sessionId));
        expect(readFileSync(where, "utf8")).toContain(`m-${r.sessionId}`);
      }
      await s.close();
      stores.splice(stores.indexOf(s), 1);
    }
  });
});
