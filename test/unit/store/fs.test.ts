import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { SwitchboardError } from "../../../src/errors.js";
import { createLogger, type Logger, silentLogger } from "../../../src/log.js";
import {
  createFsStore,
  defaultClassifyKind,
  type FsStore,
  type FsStoreOptions,
} from "../../../src/store/fs/index.js";
import type { SessionEntry, TranscriptMessage, TranscriptRef } from "../../../src/store/types.js";
import { storeContract } from "../../contract/store.js";
import { tempDir } from "../../helpers.js";

storeContract("fs", async () => {
  const t = tempDir("sb-fs-contract-");
  const driver = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
  const cleanup = async () => {
    await driver.close();
    t.cleanup();
  };
  return { driver, cleanup };
});

// the same contract while every journal compacts after a handful of writes
storeContract("fs (compacting every 3 appends)", async () => {
  const t = tempDir("sb-fs-contract-");
  const driver = await createFsStore({ stateDir: t.dir, logger: silentLogger(), compactEveryAppends: 3 });
  const cleanup = async () => {
    await driver.close();
    t.cleanup();
  };
  return { driver, cleanup };
});

// ------------------------------------------------------------------ fs-only behaviour

const dirs: Array<() => void> = [];
const stores: FsStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  for (const c of dirs.splice(0)) c();
});

function newDir(): string {
  const t = tempDir("sb-fs-");
  dirs.push(t.cleanup);
  return t.dir;
}

async function open(stateDir: string, extra: Partial<FsStoreOptions> = {}): Promise<FsStore> {
  const s = await createFsStore({ stateDir, logger: silentLogger(), ...extra });
  stores.push(s);
  return s;
}

async function reopen(s: FsStore, extra: Partial<FsStoreOptions> = {}): Promise<FsStore> {
  await s.close();
  return open(s.stateDir, extra);
}

/** A logger whose lines land in an array (for asserting warnings). */
function captureLogger(): { logger: Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split("\n"))
        if (l) lines.push(JSON.parse(l) as { level: number; msg: string });
      cb();
    },
  });
  return { logger: createLogger({ level: "warn", destination: dest }), lines };
}

const T0 = 1_700_000_000_000;
const entry = (key: string, over: Partial<SessionEntry> = {}): SessionEntry => ({
  key,
  sessionId: randomUUID(),
  agentId: "main",
  createdAt: T0,
  updatedAt: T0,
  ...over,
});
const message = (
  id: string,
  role: TranscriptMessage["role"] = "user",
  content: unknown = `text ${id}`,
): TranscriptMessage => ({
  id,
  sessionId: "s1",
  role,
  content,
  timestamp: T0,
});
const REF: TranscriptRef = { agentId: "main", sessionId: "s1" };

describe("fs store: layout", () => {
  it("writes transcripts to agents/<agentId>/sessions/<sessionId>.jsonl, one JSON object per line", async () => {
    const dir = newDir();
    const s = await open(dir);
    await s.transcripts.append(REF, message("a"));
    await s.transcripts.append(REF, message("b", "assistant", { text: "multi\nline" }));
    const file = path.join(dir, "agents", "main", "sessions", "s1.jsonl");
    expect(s.transcripts.locate(REF)).toBe(file);
    const lines = readFileSync(file, "utf8").split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe("");
    expect(JSON.parse(lines[0]!)).toEqual(message("a"));
    expect(JSON.parse(lines[1]!)).toEqual(message("b", "assistant", { text: "multi\nline" }));
  });

  it("refuses ids that would escape their folder", async () => {
    const s = await open(newDir());
    for (const bad of ["../x", "a/b", "..", "", ".hidden"]) {
      await expect(
        s.transcripts.append({ agentId: "main", sessionId: bad }, message("a")),
      ).rejects.toMatchObject({
        code: "INVALID_PARAMS",
      });
      expect(() => s.transcripts.locate({ agentId: bad, sessionId: "s" })).toThrow(/agentId/);
    }
  });

  it("archive renames to <sessionId>.jsonl.<reason>.<timestamp> and keeps the content", async () => {
    const dir = newDir();
    const s = await open(dir, { now: () => Date.UTC(2025, 0, 2, 3, 4, 5, 6) });
    await s.transcripts.append(REF, message("a"));
    const target = await s.transcripts.archive(REF, "deleted");
    const file = s.transcripts.locate(REF);
    expect(target).toBe(`${file}.deleted.2025-01-02T03-04-05.006Z`);
    expect(existsSync(file)).toBe(false);
    expect(JSON.parse(readFileSync(target!, "utf8"))).toEqual(message("a"));
    // a second archive in the same millisecond does not overwrite the first
    await s.transcripts.append(REF, message("b"));
    const second = await s.transcripts.archive(REF, "deleted");
    expect(second).not.toBe(target);
    expect(JSON.parse(readFileSync(second!, "utf8")).id).toBe("b");
    expect(JSON.parse(readFileSync(target!, "utf8")).id).toBe("a");
  });
});

describe("fs store: permissions", () => {
  it("creates the state dir and folders 0700 and files 0600", async () => {
    const dir = path.join(newDir(), "state");
    const s = await open(dir);
    await s.sessions.put(entry("k1"));
    await s.transcripts.append(REF, message("a"));
    await s.runs.put({ runId: "r", sessionKey: "k1", agentId: "main", status: "queued", createdAt: T0 });
    await s.outbox.claim("o", 1000);
    await s.kv.set("ns", "k", 1);
    await s.sessions.compact();
    const mode = (p: string) => statSync(p).mode & 0o777;
    for (const d of [
      dir,
      "sessions",
      "agents",
      "agents/main",
      "agents/main/sessions",
      "runs",
      "outbox",
      "kv",
    ]) {
      expect(mode(path.resolve(dir, d)), d).toBe(0o700);
    }
    for (const f of [
      "gateway.lock",
      "sessions/index.jsonl",
      "sessions/index.snapshot.jsonl",
      "agents/main/sessions/s1.jsonl",
      "runs/runs.jsonl",
      "outbox/outbox.jsonl",
      "kv/kv.jsonl",
    ]) {
      expect(mode(path.join(dir, f)), f).toBe(0o600);
    }
  });

  it("tightens an existing state dir that others can read, with a warning", async () => {
    const dir = newDir();
    chmodSync(dir, 0o755);
    const { logger, lines } = captureLogger();
    await open(dir, { logger });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(lines.some((l) => l.level === 40 && /readable by other users.*755/.test(l.msg))).toBe(true);
  });
});

describe("fs store: lock", () => {
  it("refuses a second open of the same state dir until the first closes", async () => {
    const dir = newDir();
    const first = await open(dir);
    expect(readFileSync(path.join(dir, "gateway.lock"), "utf8").trim()).toBe(String(process.pid));
    const err = await createFsStore({ stateDir: dir, logger: silentLogger() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SwitchboardError);
    expect(err).toMatchObject({ code: "CONFLICT" });
    expect((err as Error).message).toBe(
      `state dir ${dir} is in use by another Switchboard process (pid ${process.pid}); stop it or use another stateDir`,
    );
    await first.close();
    expect(existsSync(path.join(dir, "gateway.lock"))).toBe(false);
    await open(dir);
  });

  it("takes over a stale lock whose pid is dead", async () => {
    const dir = newDir();
    const child = spawnSync(process.execPath, ["-e", ""]);
    expect(child.pid).toBeGreaterThan(0);
    writeFileSync(path.join(dir, "gateway.lock"), `${child.pid}\n`);
    const { logger, lines } = captureLogger();
    const s = await open(dir, { logger });
    expect(readFileSync(path.join(dir, "gateway.lock"), "utf8").trim()).toBe(String(process.pid));
    expect(lines.some((l) => l.msg.includes("stale lock"))).toBe(true);
    await s.sessions.put(entry("k"));
    expect(await s.sessions.count()).toBe(1);
  });

  it("takes over a lock naming our own pid that this process does not hold (restarted container)", async () => {
    const dir = newDir();
    writeFileSync(path.join(dir, "gateway.lock"), `${process.pid}\n`);
    const s = await open(dir);
    await s.sessions.put(entry("k"));
    expect(await s.sessions.count()).toBe(1);
  });

  it("of two concurrent opens in one process exactly one wins", async () => {
    const dir = newDir();
    const results = await Promise.allSettled([open(dir), open(dir)]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const failed = results.find((r) => r.status === "rejected");
    expect((failed as PromiseRejectedResult).reason).toMatchObject({ code: "CONFLICT" });
  });

  it("leaves a lock it no longer owns in place on close", async () => {
    const dir = newDir();
    const s = await open(dir);
    writeFileSync(path.join(dir, "gateway.lock"), "1\n");
    await s.close();
    expect(readFileSync(path.join(dir, "gateway.lock"), "utf8")).toBe("1\n");
  });
});

describe("fs store: torn lines", () => {
  it("skips a torn last transcript line, warns, and the next append starts on a fresh line", async () => {
    const dir = newDir();
    const { logger, lines } = captureLogger();
    let s = await open(dir, { logger });
    for (const id of ["a", "b", "c"]) await s.transcripts.append(REF, message(id));
    const file = s.transcripts.locate(REF);
    await s.close();
    appendFileSync(file, '{"id":"torn","sessionId":"s1","role":"us');

    s = await open(dir, { logger });
    expect((await s.transcripts.readTail(REF, { limit: 10 })).map((m) => m.id)).toEqual(["a", "b", "c"]);
    expect(await s.transcripts.count(REF)).toBe(3);
    expect(s.transcripts.warnings().some((w) => w.includes(file) && w.includes("torn last line"))).toBe(true);
    expect(lines.some((l) => l.level === 40 && l.msg.includes("torn last line"))).toBe(true);

    await s.transcripts.append(REF, message("d"));
    expect((await s.transcripts.readTail(REF, { limit: 10 })).map((m) => m.id)).toEqual(["a", "b", "c", "d"]);
    expect(await s.transcripts.count(REF)).toBe(4);
    const raw = readFileSync(file, "utf8").split("\n");
    expect(raw[3]).toBe('{"id":"torn","sessionId":"s1","role":"us');
    expect(JSON.parse(raw[4]!)).toEqual(message("d"));

    s = await reopen(s);
    expect((await s.transcripts.readTail(REF, { limit: 2 })).map((m) => m.id)).toEqual(["c", "d"]);
    expect(await s.transcripts.count(REF)).toBe(4);
  });

  it("skips a torn last line of the session index, warns, and keeps appending safely", async () => {
    const dir = newDir();
    let s = await open(dir);
    await s.sessions.put(entry("k1", { label: "one" }));
    await s.sessions.put(entry("k2"));
    await s.close();
    appendFileSync(path.join(dir, "sessions", "index.jsonl"), '{"key":"k3","sess');

    s = await open(dir);
    expect((await s.sessions.list({})).map((e) => e.key).sort()).toEqual(["k1", "k2"]);
    // cut back to the last whole record, with the byte count
    expect(
      s.warnings().some((w) => w.includes("index.jsonl") && w.includes("torn last line (17 bytes) cut off")),
    ).toBe(true);
    expect(readFileSync(path.join(dir, "sessions", "index.jsonl"), "utf8").endsWith("\n")).toBe(true);
    await s.sessions.put(entry("k3", { label: "three" }));
    await s.sessions.patch("k1", { label: "uno" });

    s = await reopen(s);
    expect((await s.sessions.get("k3"))?.label).toBe("three");
    expect((await s.sessions.get("k1"))?.label).toBe("uno");
    expect(await s.sessions.count()).toBe(3);
    // every record is on its own whole line: nothing unreadable is left behind
    expect(s.warnings()).toEqual([]);
  });

  it("leaves out, and reports, an entry whose line is damaged past the fields the start-up scan reads", async () => {
    const dir = newDir();
    let s = await open(dir);
    await s.sessions.put(entry("k1"));
    await s.close();
    const line = JSON.stringify({ ...entry("k2"), deliveryContext: { channel: "x" } });
    appendFileSync(path.join(dir, "sessions", "index.jsonl"), `${line.replace('"x"}', '"x",,}')}\n`);

    s = await open(dir);
    expect(await s.sessions.get("k2")).toBeNull();
    expect((await s.sessions.list({})).map((e) => e.key)).toEqual(["k1"]);
    expect(s.warnings().some((w) => w.includes('entry "k2" unreadable on disk'))).toBe(true);
    await s.close();
  });

  it("skips unreadable and invalid lines in the middle of a transcript", async () => {
    const dir = newDir();
    const s = await open(dir);
    const file = s.transcripts.locate(REF);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(
      file,
      [
        JSON.stringify(message("a")),
        "not json",
        JSON.stringify({ id: "x", role: "nobody" }),
        JSON.stringify(message("b")),
        "",
      ].join("\n"),
    );
    expect((await s.transcripts.readTail(REF, { limit: 10 })).map((m) => m.id)).toEqual(["a", "b"]);
    expect(s.transcripts.warnings().filter((w) => w.includes("unreadable line"))).toHaveLength(2);
  });
});

describe("fs store: a known transcript id is not appended again", () => {
  it("after a restart (cold tail) and with the tail cache off, the file holds one line per id", async () => {
    const dir = newDir();
    for (const tailCacheChars of [undefined, 0]) {
      const ref: TranscriptRef = { agentId: "main", sessionId: `s-${tailCacheChars ?? "cached"}` };
      let s = await open(dir, tailCacheChars === undefined ? {} : { tailCacheChars });
      for (let i = 0; i < 600; i++) await s.transcripts.append(ref, message(`old${i}`));
      expect(await s.transcripts.append(ref, message("run1:in"))).toBe(true);
      expect(await s.transcripts.append(ref, message("run1:s0:a", "assistant"))).toBe(true);
      s = await reopen(s, tailCacheChars === undefined ? {} : { tailCacheChars });
      // the crash re-run of run1 appends the same lines again
      expect(await s.transcripts.append(ref, message("run1:in"))).toBe(false);
      expect(await s.transcripts.append(ref, message("run1:s0:a", "assistant"))).toBe(false);
      expect(await s.transcripts.append(ref, message("run1:s1:a", "assistant"))).toBe(true);
      const lines = readFileSync(s.transcripts.locate(ref), "utf8").trim().split("\n");
      const ids = lines.map((l) => (JSON.parse(l) as TranscriptMessage).id);
      expect(ids.length).toBe(603);
      expect(new Set(ids).size).toBe(603);
      expect(await s.transcripts.count(ref)).toBe(603);
      await s.close();
    }
  });
});

describe("fs store: restart persistence", () => {
  async function writeEverything(s: FsStore, tag: string): Promise<void> {
    await s.sessions.put(
      entry(`k-${tag}`, { label: `label-${tag}`, spawnedBy: "parent", updatedAt: T0 + 5 }),
    );
    await s.sessions.put(entry(`gone-${tag}`));
    await s.sessions.delete(`gone-${tag}`);
    await s.sessions.patch(`k-${tag}`, { displayName: `Name ${tag}` });
    await s.transcripts.append({ agentId: "main", sessionId: `s-${tag}` }, message(`m-${tag}`));
    await s.runs.put({
      runId: `r-${tag}`,
      sessionKey: `k-${tag}`,
      agentId: "main",
      status: "queued",
      createdAt: T0,
    });
    await s.runs.patch(`r-${tag}`, { status: "ok", reply: `reply ${tag}` });
    await s.outbox.claim(`o-${tag}`, 3_600_000);
    await s.outbox.complete(`o-${tag}`, { messageIds: [`mid-${tag}`] });
    await s.outbox.claim(`released-${tag}`, 3_600_000);
    await s.outbox.release(`released-${tag}`);
    await s.kv.set("bindings", tag, { thread: tag });
    await s.kv.set("tmp", tag, 1);
    await s.kv.delete("tmp", tag);
  }

  async function expectEverything(s: FsStore, tag: string): Promise<void> {
    const e = await s.sessions.get(`k-${tag}`);
    expect(e).toMatchObject({ label: `label-${tag}`, displayName: `Name ${tag}`, spawnedBy: "parent" });
    expect((await s.sessions.getBySessionId(e!.sessionId))?.key).toBe(`k-${tag}`);
    expect((await s.sessions.findByLabel(`label-${tag}`)).map((x) => x.key)).toEqual([`k-${tag}`]);
    expect((await s.sessions.list({ spawnedBy: "parent" })).map((x) => x.key)).toContain(`k-${tag}`);
    expect(await s.sessions.get(`gone-${tag}`)).toBeNull();
    const tail = await s.transcripts.readTail({ agentId: "main", sessionId: `s-${tag}` }, { limit: 5 });
    expect(tail.map((m) => m.id)).toEqual([`m-${tag}`]);
    expect(await s.runs.get(`r-${tag}`)).toMatchObject({ status: "ok", reply: `reply ${tag}` });
    expect((await s.runs.listBySession(`k-${tag}`, 5)).map((r) => r.runId)).toEqual([`r-${tag}`]);
    expect(await s.outbox.get(`o-${tag}`)).toEqual({ state: "done", messageIds: [`mid-${tag}`] });
    expect(await s.outbox.claim(`o-${tag}`, 1000)).toBe(false);
    expect(await s.outbox.get(`released-${tag}`)).toBeNull();
    expect(await s.kv.get("bindings", tag)).toEqual({ thread: tag });
    expect(await s.kv.get("tmp", tag)).toBeNull();
  }

  it("close + reopen sees everything, before and after compaction", async () => {
    const dir = newDir();
    let s = await open(dir);
    await writeEverything(s, "a");
    s = await reopen(s);
    await expectEverything(s, "a");

    await s.compact();
    await writeEverything(s, "b");
    s = await reopen(s);
    await expectEverything(s, "a");
    await expectEverything(s, "b");
    expect(await s.sessions.count()).toBe(2);

    // everything now in snapshots; the live logs start over
    await s.compact();
    s = await reopen(s);
    await expectEverything(s, "a");
    await expectEverything(s, "b");
    const sessionFiles = readdirSync(path.join(dir, "sessions")).sort();
    expect(sessionFiles).toEqual(["index.jsonl", "index.snapshot.idx", "index.snapshot.jsonl"]);
    expect(
      readFileSync(path.join(dir, "sessions", "index.jsonl"), "utf8")
        .split("\n")
        .filter(Boolean),
    ).toHaveLength(1);
    expect(s.warnings()).toEqual([]);
  });

  it("recovers from a compaction interrupted before its snapshot was renamed", async () => {
    const dir = newDir();
    let s = await open(dir);
    await s.sessions.put(entry("k1", { label: "v1" }));
    await s.compact();
    await s.sessions.patch("k1", { label: "v2" });
    await s.sessions.put(entry("k2"));
    await s.close();
    // simulate the crash: the live log was rotated out, a half-written temp snapshot remains
    const sdir = path.join(dir, "sessions");
    const live = readFileSync(path.join(sdir, "index.jsonl"), "utf8");
    const gen = (JSON.parse(live.split("\n")[0]!) as { $log: number }).$log;
    writeFileSync(path.join(sdir, `index.${gen}.jsonl`), live);
    writeFileSync(path.join(sdir, "index.jsonl"), `{"$log":${gen + 1}}\n`);
    writeFileSync(path.join(sdir, "index.snapshot.jsonl.tmp"), '{"$snapshot":99}\n{"key":"bogus"');

    s = await open(dir);
    expect((await s.sessions.get("k1"))?.label).toBe("v2");
    expect(await s.sessions.get("k2")).not.toBeNull();
    expect(await s.sessions.count()).toBe(2);
    expect(existsSync(path.join(sdir, "index.snapshot.jsonl.tmp"))).toBe(false);
    await s.sessions.patch("k1", { label: "v3" });
    await s.compact();
    expect(readdirSync(sdir).sort()).toEqual(["index.jsonl", "index.snapshot.idx", "index.snapshot.jsonl"]);
    s = await reopen(s);
    expect((await s.sessions.get("k1"))?.label).toBe("v3");
  });

  it("compaction does not lose writes made while it runs", async () => {
    const dir = newDir();
    let s = await open(dir, { compactEveryAppends: 10 });
    for (let i = 0; i < 300; i++) await s.sessions.put(entry(`k${i}`, { updatedAt: T0 + i, totalTokens: 0 }));
    const ops: Array<Promise<unknown>> = [];
    for (let round = 1; round <= 5; round++) {
      ops.push(s.compact());
      for (let i = 0; i < 300; i += 3) {
        ops.push(s.sessions.patch(`k${i}`, { totalTokens: round, updatedAt: T0 + 1000 * round + i }));
        ops.push(
          s.sessions.update(`k${i + 1}`, (cur) => ({ ...cur!, inputTokens: (cur!.inputTokens ?? 0) + 1 })),
        );
      }
      ops.push(s.sessions.delete(`k${round * 3 + 2}`));
      ops.push(s.transcripts.append(REF, message(`m${round}`)));
      ops.push(s.kv.set("ns", `k${round}`, round));
    }
    await Promise.all(ops);
    const check = async (store: FsStore) => {
      expect(await store.sessions.count()).toBe(295);
      for (let i = 0; i < 300; i += 3) {
        expect((await store.sessions.get(`k${i}`))?.totalTokens).toBe(5);
        expect((await store.sessions.get(`k${i + 1}`))?.inputTokens).toBe(5);
      }
      for (let round = 1; round <= 5; round++)
        expect(await store.sessions.get(`k${round * 3 + 2}`)).toBeNull();
      expect((await store.sessions.list({ limit: 1 }))[0]?.key).toBe("k297");
      expect((await store.kv.list("ns")).length).toBe(5);
    };
    await check(s);
    s = await reopen(s, { compactEveryAppends: 10 });
    await check(s);
    expect(s.warnings()).toEqual([]);
  });
});

describe("fs store: transcript reads stay at the tail", () => {
  it("readTail on a file with a 200 MB sparse prefix reads only the last chunks", async () => {
    const dir = newDir();
    const s = await open(dir);
    const file = s.transcripts.locate(REF);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, "");
    truncateSync(file, 200 * 1024 * 1024); // zeros on disk cost nothing; reading them would
    let text = "\n";
    for (let i = 0; i < 1000; i++)
      text += `${JSON.stringify(message(`m${i}`, i % 4 === 3 ? "toolResult" : "user"))}\n`;
    appendFileSync(file, text);

    const before = s.transcripts.readStats().tailBytesRead;
    const tail = await s.transcripts.readTail(REF, { limit: 10 });
    expect(tail.map((m) => m.id)).toEqual([
      "m986",
      "m988",
      "m989",
      "m990",
      "m992",
      "m993",
      "m994",
      "m996",
      "m997",
      "m998",
    ]);
    const withTools = await s.transcripts.readTail(REF, { limit: 100, includeTools: true });
    expect(withTools[0]!.id).toBe("m900");
    expect(withTools).toHaveLength(100);
    expect(s.transcripts.readStats().tailBytesRead - before).toBeLessThanOrEqual(2 * 64 * 1024);
    expect(s.warnings()).toEqual([]);
    // an append after the hand-written tail still lands on its own line
    await s.transcripts.append(REF, message("new"));
    expect((await s.transcripts.readTail(REF, { limit: 1 }))[0]!.id).toBe("new");
  });

  it("reads a message longer than the read chunk", async () => {
    const s = await open(newDir());
    const big = "x".repeat(300 * 1024);
    await s.transcripts.append(REF, message("a"));
    await s.transcripts.append(REF, message("big", "assistant", big));
    await s.transcripts.append(REF, message("c"));
    const got = await s.transcripts.readTail(REF, { limit: 3 });
    expect(got.map((m) => m.id)).toEqual(["a", "big", "c"]);
    expect(got[1]!.content).toBe(big);
  });

  it("count scans a file once, then follows appends without re-reading it", async () => {
    const dir = newDir();
    const s = await open(dir);
    const file = s.transcripts.locate(REF);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(
      file,
      Array.from({ length: 500 }, (_, i) => `${JSON.stringify(message(`m${i}`))}\n`).join(""),
    );
    expect(await s.transcripts.count(REF)).toBe(500);
    const scanned = s.transcripts.readStats().countBytesRead;
    expect(scanned).toBe(statSync(file).size);
    await s.transcripts.append(REF, message("x"));
    expect(await s.transcripts.count(REF)).toBe(501);
    expect(await s.transcripts.count(REF)).toBe(501);
    expect(s.transcripts.readStats().countBytesRead).toBe(scanned);
  });
});

describe("fs store: unterminated but whole last line", () => {
  it("is read and counted, and the next append goes on a new line", async () => {
    const s = await open(newDir());
    const file = s.transcripts.locate(REF);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(message("a"))}\n${JSON.stringify(message("b"))}`);
    expect(await s.transcripts.count(REF)).toBe(2);
    expect((await s.transcripts.readTail(REF, { limit: 5 })).map((m) => m.id)).toEqual(["a", "b"]);
    await s.transcripts.append(REF, message("c"));
    expect(await s.transcripts.count(REF)).toBe(3);
    expect(
      readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l).id),
    ).toEqual(["a", "b", "c"]);
  });
});

describe("fs store: runs, outbox, kinds, closing", () => {
  it("keeps only the newest finished runs, in memory and across restarts", async () => {
    const dir = newDir();
    let s = await open(dir, { maxFinishedRuns: 3 });
    await s.runs.put({ runId: "live", sessionKey: "k", agentId: "main", status: "running", createdAt: T0 });
    for (let i = 0; i < 5; i++) {
      await s.runs.put({
        runId: `r${i}`,
        sessionKey: "k",
        agentId: "main",
        status: "ok",
        createdAt: T0 + i + 1,
      });
    }
    const ids = async (store: FsStore) => (await store.runs.listBySession("k", 10)).map((r) => r.runId);
    expect(await ids(s)).toEqual(["r4", "r3", "r2", "live"]);
    expect(await s.runs.get("r0")).toBeNull();
    s = await reopen(s, { maxFinishedRuns: 3 });
    expect(await ids(s)).toEqual(["r4", "r3", "r2", "live"]);
    await s.compact();
    s = await reopen(s, { maxFinishedRuns: 3 });
    expect(await ids(s)).toEqual(["r4", "r3", "r2", "live"]);
  });

  it("patchSoon shows at once and writes no line of its own: it rides with the runs log's next write, or close", async () => {
    const dir = newDir();
    let s = await open(dir);
    const run = { runId: "r", sessionKey: "k", agentId: "main", status: "queued" as const, createdAt: T0 };
    await s.runs.put(run);
    const log = path.join(dir, "runs", "runs.jsonl");
    const linesOf = () => readFileSync(log, "utf8").trim().split("\n").slice(1);
    expect(linesOf()).toHaveLength(1);
    const marked = await s.runs.patchSoon?.("r", { status: "running", startedAt: T0 + 1 });
    expect(marked).toMatchObject({ status: "running", startedAt: T0 + 1 });
    expect((await s.runs.get("r"))?.status).toBe("running");
    expect((await s.runs.listBySession("k", 5))[0]?.status).toBe("running");
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(linesOf()).toHaveLength(1); // not written yet
    await s.runs.patch("r", { status: "ok", endedAt: T0 + 2 });
    expect(linesOf().map((l) => (JSON.parse(l) as { run: { status: string } }).run.status)).toEqual([
      "queued",
      "running",
      "ok",
    ]);
    expect(await s.runs.patchSoon?.("missing", { status: "running" })).toBeNull();

    await s.runs.put({ ...run, runId: "r2" });
    await s.runs.patchSoon?.("r2", { status: "running", startedAt: T0 + 3 });
    s = await reopen(s); // close writes it
    expect(await s.runs.get("r2")).toMatchObject({ status: "running", startedAt: T0 + 3 });
  });

  it("putSoon shows at once and writes no line of its own: a queued run, marked running, costs one write with its final record", async () => {
    const dir = newDir();
    let s = await open(dir);
    const log = path.join(dir, "runs", "runs.jsonl");
    const linesOf = () => readFileSync(log, "utf8").trim().split("\n").slice(1);
    const run = { runId: "q", sessionKey: "k", agentId: "main", status: "queued" as const, createdAt: T0 };
    await s.runs.putSoon?.(run);
    expect(await s.runs.get("q")).toEqual(run);
    expect((await s.runs.listBySession("k", 5)).map((r) => r.runId)).toEqual(["q"]);
    await s.runs.patchSoon?.("q", { status: "running", startedAt: T0 + 1 });
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(linesOf()).toHaveLength(0);
    await expect(s.runs.putSoon?.({ ...run, status: "nope" as "queued" })).rejects.toThrow(/status/);
    await s.runs.patch("q", { status: "ok", endedAt: T0 + 2 });
    expect(linesOf().map((l) => (JSON.parse(l) as { run: { status: string } }).run.status)).toEqual([
      "queued",
      "running",
      "ok",
    ]);
    await s.runs.putSoon?.({ ...run, runId: "q2" });
    s = await reopen(s); // close writes it
    expect(await s.runs.get("q2")).toEqual({ ...run, runId: "q2" });
  });

  it("forgets an outbox record ttlMs after its claim, also across restarts", async () => {
    const dir = newDir();
    let now = T0;
    let s = await open(dir, { now: () => now });
    expect(await s.outbox.claim("a", 1000)).toBe(true);
    expect(await s.outbox.claim("b", 5000)).toBe(true);
    now = T0 + 999;
    expect(await s.outbox.claim("a", 1000)).toBe(false);
    now = T0 + 1000;
    expect(await s.outbox.get("a")).toBeNull();
    expect(await s.outbox.claim("a", 10_000)).toBe(true);
    await s.outbox.complete("b", { messageIds: ["1"] });
    s = await reopen(s, { now: () => now });
    expect(await s.outbox.get("b")).toEqual({ state: "done", messageIds: ["1"] });
    now = T0 + 5000;
    s = await reopen(s, { now: () => now });
    expect(await s.outbox.get("b")).toBeNull();
    expect(await s.outbox.get("a")).toEqual({ state: "claimed" });
  });

  it("uses an injected kind classifier for list({ kinds })", async () => {
    const s = await open(newDir(), { classifyKind: (k) => (k.startsWith("x") ? "cron" : "other") });
    await s.sessions.put(entry("x1"));
    await s.sessions.put(entry("agent:main:main"));
    expect((await s.sessions.list({ kinds: ["cron"] })).map((e) => e.key)).toEqual(["x1"]);
  });

  it("classifies keys by the SEMANTICS §1 rule by default", () => {
    const cases: Array<[string, string]> = [
      ["main", "main"],
      ["agent:main:main", "main"],
      ["cron:job", "cron"],
      ["agent:a:cron:job", "cron"],
      ["hook:x", "hook"],
      ["agent:a:hook:x", "hook"],
      ["node-1", "node"],
      ["agent:a:node-1", "node"],
      ["agent:a:telegram:group:1", "group"],
      ["agent:a:slack:channel:c:thread:1", "group"],
      ["agent:a:direct:bob", "other"],
      ["agent:a:subagent:123", "other"],
    ];
    for (const [key, kind] of cases) expect(defaultClassifyKind(key), key).toBe(kind);
  });

  it("rejects writes after close with UNAVAILABLE, and close is idempotent", async () => {
    const s = await open(newDir());
    await s.close();
    await s.close();
    await expect(s.sessions.put(entry("k"))).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await expect(s.transcripts.append(REF, message("a"))).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await expect(s.kv.set("n", "k", 1)).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });

  it("validates entries and options with errors that name the field", async () => {
    const s = await open(newDir());
    await expect(s.sessions.put({ ...entry("k"), sessionId: "" })).rejects.toThrow(/sessionId/);
    await expect(s.sessions.put({ ...entry("k"), updatedAt: Number.NaN })).rejects.toThrow(/updatedAt/);
    await expect(s.sessions.update("k", () => entry("other"))).rejects.toThrow(/key/);
    await expect(s.kv.set("n", "k", undefined)).rejects.toMatchObject({ code: "INVALID_PARAMS" });
    await expect(
      createFsStore({ stateDir: newDir(), logger: silentLogger(), compactEveryAppends: 0 }),
    ).rejects.toThrow(/compactEveryAppends/);
  });
});
