import { randomUUID } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../../../../src/log.js";
import { createFsStore, type FsStore } from "../../../../src/store/fs/index.js";
import { readSidecar, sidecarPath } from "../../../../src/store/fs/session-sidecar.js";
import type { SessionEntry } from "../../../../src/store/types.js";
import { tempDir } from "../../../helpers.js";

const dirs: Array<() => void> = [];
const stores: FsStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  for (const c of dirs.splice(0)) c();
});

async function open(stateDir?: string): Promise<FsStore> {
  let dir = stateDir;
  if (dir === undefined) {
    const t = tempDir("sb-fs-sidecar-");
    dirs.push(t.cleanup);
    dir = t.dir;
  }
  const s = await createFsStore({ stateDir: dir, logger: silentLogger() });
  stores.push(s);
  return s;
}

/** Closes a store (so its files can be changed behind its back) and stops tracking it. */
async function shut(s: FsStore): Promise<void> {
  await s.close();
  stores.splice(stores.indexOf(s), 1);
}

async function reopen(s: FsStore): Promise<FsStore> {
  await shut(s);
  return open(s.stateDir);
}

const T0 = 1_700_000_000_000;
const AGENTS = ["main", "research", "ops"];

/** Entries with every indexed field in play: agents, archived, labels, parents, odd names. */
function entries(n: number, prefix = "k"): SessionEntry[] {
  const out: SessionEntry[] = [];
  for (let i = 0; i < n; i++) {
    const e: SessionEntry = {
      key: `agent:${AGENTS[i % 3]}:telegram:group:${prefix}${i}`,
      sessionId: randomUUID(),
      agentId: AGENTS[i % 3]!,
      createdAt: T0,
      updatedAt: T0 + ((i * 7919) % n), // not in key order
      displayName: i % 5 === 0 ? `Gruppe Zürich 🚀 ${i}` : `Chat ${i}`,
    };
    if (i % 4 === 0) e.label = i % 8 === 0 ? `label-${i % 3}` : "";
    if (i % 6 === 0) e.spawnedBy = `agent:main:telegram:group:${prefix}0`;
    if (i % 10 === 0) e.archivedAt = T0 + 1;
    if (i % 7 === 0) delete e.displayName;
    out.push(e);
  }
  return out;
}

async function putAll(s: FsStore, list: SessionEntry[]): Promise<void> {
  for (let i = 0; i < list.length; i += 500)
    await Promise.all(list.slice(i, i + 500).map((e) => s.sessions.put(e)));
}

/** What the index answers, through every query that uses its fields. */
async function view(s: FsStore, sample: SessionEntry[]) {
  const all = await s.sessions.list({ limit: 1_000_000, includeArchived: true });
  return {
    count: await s.sessions.count(),
    all: all.map((e) => e.key),
    live: (await s.sessions.list({ limit: 50 })).map((e) => e.key),
    research: (await s.sessions.list({ limit: 50, agentId: "research" })).map((e) => e.key),
    labelled: (await s.sessions.findByLabel("label-1")).map((e) => e.key),
    emptyLabel: (await s.sessions.list({ limit: 1000, label: "" })).length,
    children: (await s.sessions.list({ limit: 1000, spawnedBy: sample[0]!.key })).length,
    search: (await s.sessions.list({ limit: 1000, search: "zürich 🚀" })).map((e) => e.key),
    bySessionId: await Promise.all(
      sample.map(async (e) => (await s.sessions.getBySessionId(e.sessionId))?.key),
    ),
    entries: await Promise.all(sample.map((e) => s.sessions.get(e.key))),
  };
}

describe("fs session index sidecar (index.snapshot.idx)", () => {
  it("a compaction writes it and the next open loads every entry from it, answering as the scan does", async () => {
    let s = await open();
    const list = entries(600);
    await putAll(s, list);
    await s.compact();
    const idx = sidecarPath(path.join(s.stateDir, "sessions", "index.snapshot.jsonl"));
    expect(existsSync(idx)).toBe(true);
    expect(statSync(idx).mode & 0o777).toBe(0o600);
    const sample = list.filter((_, i) => i % 37 === 0);
    const before = await view(s, sample);

    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("sidecar");
    expect(await view(s, sample)).toEqual(before);

    // the same files without the sidecar: the scan gives the same answers
    unlinkSync(idx);
    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("scan");
    expect(await view(s, sample)).toEqual(before);
    expect(s.warnings()).toEqual([]);
  });

  it("writes made after the snapshot replay over the sidecar's entries", async () => {
    let s = await open();
    const list = entries(50);
    await putAll(s, list);
    await s.compact();
    await s.sessions.patch(list[1]!.key, { label: "after", updatedAt: T0 + 10_000 });
    await s.sessions.delete(list[2]!.key);
    await s.sessions.put({ ...list[3]!, key: "agent:main:new", updatedAt: T0 + 20_000 });
    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("sidecar");
    expect(await s.sessions.count()).toBe(50);
    expect((await s.sessions.get(list[1]!.key))?.label).toBe("after");
    expect(await s.sessions.get(list[2]!.key)).toBeNull();
    expect((await s.sessions.list({ limit: 2 })).map((e) => e.key)).toEqual(["agent:main:new", list[1]!.key]);
    expect((await s.sessions.findByLabel("after")).map((e) => e.key)).toEqual([list[1]!.key]);
  });

  it("a sidecar of an older snapshot is not used; the open scans and writes one for the next open", async () => {
    let s = await open();
    const list = entries(40);
    await putAll(s, list);
    await s.compact();
    const sdir = path.join(s.stateDir, "sessions");
    const idx = sidecarPath(path.join(sdir, "index.snapshot.jsonl"));
    const old = readFileSync(idx);
    await s.sessions.patch(list[1]!.key, { label: "newer", updatedAt: T0 + 5000 });
    await s.compact();
    writeFileSync(idx, old, { mode: 0o600 });

    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("scan");
    expect((await s.sessions.get(list[1]!.key))?.label).toBe("newer");
    await vi.waitFor(() => expect(readFileSync(idx).equals(old)).toBe(false), { timeout: 5000 });
    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("sidecar");
    expect((await s.sessions.list({ limit: 1 }))[0]?.key).toBe(list[1]!.key);
    expect((await s.sessions.findByLabel("newer")).length).toBe(1);
  });

  it("a store written before sidecars existed gets one after its first open", async () => {
    let s = await open();
    await putAll(s, entries(30));
    await s.compact();
    const idx = sidecarPath(path.join(s.stateDir, "sessions", "index.snapshot.jsonl"));
    unlinkSync(idx);
    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("scan");
    await vi.waitFor(() => expect(existsSync(idx)).toBe(true), { timeout: 5000 });
    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("sidecar");
    expect(await s.sessions.count()).toBe(30);
  });

  it("a snapshot changed behind its sidecar's back (same S, same size) is scanned", async () => {
    let s = await open();
    const list = entries(20);
    await putAll(s, list);
    await s.compact();
    const snap = path.join(s.stateDir, "sessions", "index.snapshot.jsonl");
    await shut(s);
    // the newest entry's displayName, same length: the index would answer with the old one
    const text = readFileSync(snap, "utf8");
    const newest = [...list].sort((a, b) => b.updatedAt - a.updatedAt)[0]!;
    const was = JSON.stringify(newest.displayName ?? "");
    expect(text.includes(`"displayName":${was}`)).toBe(true);
    writeFileSync(
      snap,
      text.replace(
        `"displayName":${was}`,
        `"displayName":${was.replace(/./gu, (c) => (c === '"' ? c : "x"))}`,
      ),
    );
    s = await open(s.stateDir);
    expect(s.sessions.snapshotLoad).toBe("scan");
    expect((await s.sessions.list({ limit: 1, search: "xxxx" }))[0]?.key).toBe(newest.key);
  });

  it("a damaged sidecar is never half used: entries given before the damage are dropped and the scan loads", async () => {
    let s = await open();
    const list = entries(20_050); // two blocks: the damage is in the second
    await putAll(s, list);
    await s.compact();
    const snapFile = path.join(s.stateDir, "sessions", "index.snapshot.jsonl");
    const idx = sidecarPath(snapFile);
    await shut(s);

    const good = readFileSync(idx);
    // the second block's key column: one separator turned into a letter merges two keys
    const head = good.indexOf('{"n":50,');
    expect(head).toBeGreaterThan(0);
    const keys = good.indexOf(0x0a, head) + 1 + 19 * 50;
    const damaged = Buffer.from(good);
    const nul = damaged.indexOf(0, keys);
    expect(nul - keys).toBeLessThan(100);
    damaged[nul] = 0x78;
    // and in the first block, a key renamed: given before the second block fails, so it must be dropped
    const firstKeys = damaged.indexOf(0x0a, damaged.indexOf('{"n":20000,')) + 1 + 19 * 20_000;
    const firstKey = damaged.toString("utf8", firstKeys, damaged.indexOf(0, firstKeys));
    damaged.write("Z", firstKeys + firstKey.length - 1, "latin1");
    const bogus = `${firstKey.slice(0, -1)}Z`;
    writeFileSync(idx, damaged);
    const snap = { file: snapFile, gen: 0, bytes: statSync(snapFile).size };
    snap.gen = (
      JSON.parse(readFileSync(snapFile, "utf8").slice(0, 40).split("\n")[0]!) as { $snapshot: number }
    ).$snapshot;
    let given = 0;
    expect(await readSidecar(snap, () => given++)).toBe("string columns do not match");
    expect(given).toBeGreaterThanOrEqual(20_000); // the first block (and some of the second) went out first

    s = await open(s.stateDir);
    expect(s.sessions.snapshotLoad).toBe("scan");
    expect(await s.sessions.count()).toBe(20_050);
    expect((await s.sessions.list({ limit: 30_000, includeArchived: true })).length).toBe(20_050);
    expect(await s.sessions.get(bogus)).toBeNull();
    expect(await s.sessions.get(firstKey)).not.toBeNull();
    expect(s.warnings()).toEqual([]);

    // torn: cut inside the last block
    await shut(s);
    writeFileSync(idx, good.subarray(0, good.length - 100));
    s = await open(s.stateDir);
    expect(s.sessions.snapshotLoad).toBe("scan");
    expect(await s.sessions.count()).toBe(20_050);
  });

  it("other damage falls back to the scan: garbage, an empty file, a wrong or impossible count, another byte order", async () => {
    let s = await open();
    await putAll(s, entries(25));
    await s.compact();
    const idx = sidecarPath(path.join(s.stateDir, "sessions", "index.snapshot.jsonl"));
    const good = readFileSync(idx, "latin1");
    const header = good.slice(0, good.indexOf("\n"));
    const cases = [
      "garbage\n",
      "",
      good.replace(header, header.replace('"entries":25', '"entries":26')),
      // a count no file of this size can hold (the index is sized by it before any entry is read)
      good.replace(header, header.replace('"entries":25', '"entries":1000000000000')),
      good.replace(
        header,
        header.replace(/"endian":"(LE|BE)"/, (_, e: string) => `"endian":"${e === "LE" ? "BE" : "LE"}"`),
      ),
      good.replace(/\{"n":\d+/, '{"n":-1'),
    ];
    for (const c of cases) {
      await shut(s);
      writeFileSync(idx, c, "latin1");
      s = await open(s.stateDir);
      expect(s.sessions.snapshotLoad).toBe("scan");
      expect(await s.sessions.count()).toBe(25);
    }
    expect(s.warnings()).toEqual([]);

    // a read that fails (here: the sidecar's name is a directory) costs the open its speed, never the open
    await shut(s);
    // the scan open above began rewriting the sidecar, and closing stops that at any point: before
    // or after its old file was removed, so it may or may not be there now
    rmSync(idx, { force: true });
    mkdirSync(idx);
    s = await open(s.stateDir);
    expect(s.sessions.snapshotLoad).toBe("scan");
    expect(await s.sessions.count()).toBe(25);
  });

  it("a count no file of its size can hold is refused before anything is sized by it", async () => {
    const s = await open();
    await putAll(s, entries(25));
    await s.compact();
    const snapFile = path.join(s.stateDir, "sessions", "index.snapshot.jsonl");
    const idx = sidecarPath(snapFile);
    const snap = { file: snapFile, gen: 0, bytes: statSync(snapFile).size };
    snap.gen = (
      JSON.parse(readFileSync(snapFile, "utf8").split("\n")[0]!) as { $snapshot: number }
    ).$snapshot;
    await shut(s);
    const good = readFileSync(idx, "latin1");
    const told: number[] = [];
    expect(
      await readSidecar(
        snap,
        () => {},
        (n) => told.push(n),
      ),
    ).toBe(25);
    expect(told).toEqual([25]);
    writeFileSync(idx, good.replace('"entries":25', '"entries":1000000000000'), "latin1");
    told.length = 0;
    expect(
      await readSidecar(
        snap,
        () => {},
        (n) => told.push(n),
      ),
    ).toBe("unreadable header");
    expect(told).toEqual([]);
  });

  it("a string holding NUL (which the format cannot carry) means no sidecar, and nothing breaks", async () => {
    let s = await open();
    await putAll(s, entries(10));
    await s.sessions.put({
      key: "agent:main:nul",
      sessionId: randomUUID(),
      agentId: "main",
      createdAt: T0,
      updatedAt: T0,
      displayName: "a\u0000b",
    });
    await s.compact();
    const idx = sidecarPath(path.join(s.stateDir, "sessions", "index.snapshot.jsonl"));
    expect(existsSync(idx)).toBe(false);
    expect(existsSync(`${idx}.tmp`)).toBe(false);
    s = await reopen(s);
    expect(s.sessions.snapshotLoad).toBe("scan");
    expect((await s.sessions.get("agent:main:nul"))?.displayName).toBe("a\u0000b");
  });

  it("a temp file left by a write cut short is removed at open", async () => {
    let s = await open();
    await putAll(s, entries(5));
    await s.compact();
    const idx = sidecarPath(path.join(s.stateDir, "sessions", "index.snapshot.jsonl"));
    await shut(s);
    copyFileSync(idx, `${idx}.tmp`);
    s = await open(s.stateDir);
    expect(s.sessions.snapshotLoad).toBe("sidecar"); // so no write of its own is under way
    expect(existsSync(`${idx}.tmp`)).toBe(false);
    expect(await s.sessions.count()).toBe(5);
  });
});
