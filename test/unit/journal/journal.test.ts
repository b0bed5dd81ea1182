import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import { Writable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Journal, type JournalOptions } from "../../../src/journal/index.js";
import { createLogger, type Logger, silentLogger } from "../../../src/log.js";
import { tempDir } from "../../helpers.js";

/**
 * The shared journal's options that the local queue added (fsync, note, stats) and the rule
 * that makes both ways of owning a journal safe: the state is captured in the same step as the
 * rotated log's last write.
 */

type Rec = { k: string; v: number };

/** The next `fail` synchronous appends fail as a full disk would (nothing written). */
const fault = vi.hoisted(() => ({ fail: 0 }));
vi.mock("../../../src/journal/fsutil.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../../src/journal/fsutil.js")>();
  return {
    ...real,
    appendSync(fd: number, text: string): number {
      if (fault.fail > 0) {
        fault.fail--;
        throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      }
      return real.appendSync(fd, text);
    },
  };
});

const cleanups: Array<() => void> = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const c of cleanups.splice(0)) c();
});

function dir(): string {
  const t = tempDir("sb-shared-journal-");
  cleanups.push(t.cleanup);
  return t.dir;
}

/** A map owned the fs store's way: applied in `apply`, after the write. */
async function openMap(d: string, extra: Partial<JournalOptions<Rec>> = {}) {
  const state = new Map<string, number>();
  const warnings: string[] = [];
  const j = await Journal.open<Rec>({
    dir: d,
    name: "m",
    logger: silentLogger(),
    warnings: { add: (m) => warnings.push(m) },
    compactEveryAppends: 1 << 30,
    decode: (v) => (typeof v === "object" && v !== null && "k" in v ? (v as Rec) : null),
    replay: (r) => state.set(r.k, r.v),
    snapshot: () => [...state].map(([k, v]) => ({ k, v })),
    size: () => state.size,
    ...extra,
  });
  const put = (k: string, v: number) => j.append({ k, v }, () => state.set(k, v));
  return { j, state, warnings, put };
}

/** A logger whose error messages land in an array. */
function errorLogger(): { logger: Logger; errors: string[] } {
  const errors: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split("\n")) if (l) errors.push((JSON.parse(l) as { msg: string }).msg);
      cb();
    },
  });
  return { logger: createLogger({ level: "error", destination }), errors };
}

const lines = (file: string) => readFileSync(file, "utf8").trim().split("\n");

/** Makes the next `n` fdatasync calls of any file handle fail as `code` would. */
async function failDatasync(d: string, code: string, n = 1) {
  const probe = await open(path.join(d, ".probe"), "w");
  const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
  await probe.close();
  const real = proto.datasync;
  let left = n;
  return vi.spyOn(proto, "datasync").mockImplementation(function (this: unknown) {
    if (left-- > 0) return Promise.reject(Object.assign(new Error(`${code}: datasync`), { code }));
    return real.call(this);
  });
}

describe("shared Journal: fsync, note, stats", () => {
  it("without fsync (the fs store) never syncs; one write per event-loop phase", async () => {
    const d = dir();
    const { j, put } = await openMap(d);
    await Promise.all(Array.from({ length: 100 }, (_, i) => put(`k${i}`, i)));
    j.note({ k: "n", v: 1 });
    await put("last", 0);
    expect(j.stats()).toMatchObject({ writes: 2, syncs: 0, compactions: 0 });
    expect(j.stats().bytes).toBe(readFileSync(j.livePath).length);
    await j.close();
  });

  it("with fsync, syncs a batch holding an awaited append before it resolves, never a batch of notes alone", async () => {
    const d = dir();
    const { j, put } = await openMap(d, { fsync: true });
    const probe = await open(path.join(d, ".probe"), "w");
    const spy = vi.spyOn(Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }, "datasync");
    await probe.close();
    j.note({ k: "a", v: 1 });
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(j.stats()).toMatchObject({ writes: 1, syncs: 0 });
    expect(spy).not.toHaveBeenCalled();
    let resolved = false;
    const p = put("b", 2).then(() => {
      resolved = true;
    });
    j.note({ k: "c", v: 3 }); // same batch: covered by its sync
    // the write happened, the resolution waits for the fdatasync
    for (let i = 0; i < 50 && spy.mock.calls.length === 0; i++) await new Promise((r) => setImmediate(r));
    expect(spy).toHaveBeenCalledTimes(1);
    await p;
    expect(resolved).toBe(true);
    expect(j.stats()).toMatchObject({ writes: 2, syncs: 1 });
    await j.close();
    expect(lines(j.livePath)).toHaveLength(4); // header + 3
  });

  it("a failed fdatasync rejects with STORAGE_UNAVAILABLE, cuts the batch off, and the next batch works", async () => {
    const d = dir();
    const { logger, errors } = errorLogger();
    const { j, put } = await openMap(d, { fsync: true, logger });
    await put("before", 1);
    const spy = await failDatasync(d, "EIO");
    const failed = put("lost", 2);
    j.note({ k: "lost-note", v: 3 });
    await expect(failed).rejects.toMatchObject({ code: "STORAGE_UNAVAILABLE" });
    expect(spy).toHaveBeenCalledTimes(1);
    expect(errors).toEqual(["journal fdatasync failed"]); // once for the batch, the note included
    expect(readFileSync(j.livePath, "utf8")).not.toContain("lost");
    await put("after", 4); // same open file, no restart
    await j.close();
    const again = await openMap(d);
    expect([...again.state.keys()]).toEqual(["before", "after"]);
    await again.j.close();
  });

  it("noteJsonLater starts no write: it rides with the next append's batch (and its fdatasync)", async () => {
    const d = dir();
    const { j, put } = await openMap(d, { fsync: true });
    await put("first", 1);
    expect(j.stats()).toMatchObject({ writes: 1, syncs: 1 });
    j.noteJsonLater(JSON.stringify({ k: "start", v: 2 }));
    j.noteJsonLater(JSON.stringify({ k: "done", v: 3 }));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(j.stats().writes).toBe(1); // nothing written for the notes alone
    expect(readFileSync(j.livePath, "utf8")).not.toContain("start");
    await put("next", 4);
    expect(j.stats()).toMatchObject({ writes: 2, syncs: 1 + 1 });
    expect(lines(j.livePath).slice(1)).toEqual([
      '{"k":"first","v":1}',
      '{"k":"start","v":2}',
      '{"k":"done","v":3}',
      '{"k":"next","v":4}',
    ]);
    await j.close();
  });

  it("noteJsonLater is written alone once its time is up, and by close before that", async () => {
    const d = dir();
    const { j } = await openMap(d, { laterMs: 20 });
    j.noteJsonLater(JSON.stringify({ k: "alone", v: 1 }));
    expect(j.stats().writes).toBe(0);
    for (let i = 0; i < 200 && j.stats().writes === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(j.stats().writes).toBe(1);
    expect(lines(j.livePath).slice(1)).toEqual(['{"k":"alone","v":1}']);

    j.noteJsonLater(JSON.stringify({ k: "at-close", v: 2 }));
    await j.close(); // in the same step: close itself writes it, it does not drop it
    expect(lines(j.livePath).slice(1)).toEqual(['{"k":"alone","v":1}', '{"k":"at-close","v":2}']);
    const again = await openMap(d);
    expect(again.state.get("at-close")).toBe(2);
    await again.j.close();
  });

  it("noteJsonLater before a compaction lands in the rotated log, never twice", async () => {
    const d = dir();
    const { j, put, state } = await openMap(d);
    await put("a", 1);
    state.set("later", 9); // an owner that applies when noting (the local queue)
    j.noteJsonLater(JSON.stringify({ k: "later", v: 9 }));
    await j.compact();
    await put("b", 2);
    await j.close();
    const live = lines(j.livePath).slice(1);
    expect(live).toEqual(['{"k":"b","v":2}']);
    expect(lines(j.snapshotPath).filter((l) => l.includes("later"))).toHaveLength(1);
    const again = await openMap(d);
    expect(Object.fromEntries(again.state)).toEqual({ a: 1, later: 9, b: 2 });
    await again.j.close();
  });

  it("a note in a failed batch is logged once and never becomes an unhandled rejection", async () => {
    const d = dir();
    const { logger, errors } = errorLogger();
    const { j, put } = await openMap(d, { logger });
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    try {
      fault.fail = 1;
      j.note({ k: "n1", v: 1 });
      j.note({ k: "n2", v: 2 });
      for (let i = 0; i < 5 && fault.fail > 0; i++) await new Promise((r) => setImmediate(r));
      expect(fault.fail).toBe(0);
      await put("ok", 3);
      // let any stray rejection surface before the listener goes
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(unhandled).toEqual([]);
    expect(errors).toEqual(["journal write failed"]);
    await j.close();
    expect(readFileSync(j.livePath, "utf8")).not.toContain("n1");
    j.note({ k: "after-close", v: 0 }); // dropped, no throw
  });

  it("replays a live log without a header (an older format) and moves it out at the first compaction", async () => {
    const d = dir();
    writeFileSync(path.join(d, "m.jsonl"), '{"k":"a","v":1}\n{"k":"b","v":2}\n{"k":"a","v":3}\n');
    const { j, state, put } = await openMap(d);
    expect([...state]).toEqual([
      ["a", 3],
      ["b", 2],
    ]);
    expect(j.generation).toBe(1);
    await put("c", 4);
    await j.compact();
    await j.close();
    expect(
      readdirSync(d)
        .filter((f) => f.startsWith("m."))
        .sort(),
    ).toEqual(["m.jsonl", "m.snapshot.jsonl"]);
    expect(lines(path.join(d, "m.jsonl"))).toEqual(['{"$log":2}']);
    const again = await openMap(d);
    expect([...again.state]).toEqual([
      ["a", 3],
      ["b", 2],
      ["c", 4],
    ]);
    expect(again.j.stats().compactions).toBe(0);
    await again.j.close();
  });
});

describe("shared Journal: loadSnapshot", () => {
  it("asks the owner for the snapshot (with its S and size) before the logs, and reads its lines only when told to", async () => {
    const d = dir();
    const first = await openMap(d);
    await first.put("a", 1);
    await first.put("b", 2);
    await first.j.compact();
    await first.put("a", 3); // after the snapshot: in the live log
    await first.j.close();
    const snapshot = path.join(d, "m.snapshot.jsonl");
    const S = (JSON.parse(lines(snapshot)[0]!) as { $snapshot: number }).$snapshot;

    // the owner loads the snapshot itself: the journal does not read its lines, then replays the log over it
    const asked: unknown[] = [];
    const fromOwner = new Map<string, number>();
    const decode = vi.fn((v: unknown) =>
      typeof v === "object" && v !== null && "k" in v ? (v as Rec) : null,
    );
    const own = await openMap(d, {
      decode,
      replay: (r) => fromOwner.set(r.k, r.v),
      loadSnapshot: async (snap) => {
        asked.push(snap);
        fromOwner.set("a", 1).set("b", 2).set("z", 9); // "z": proof the owner's version is what counts
        return true;
      },
    });
    expect(asked).toEqual([{ file: snapshot, gen: S, bytes: readFileSync(snapshot).length }]);
    expect(decode.mock.calls.map(([v]) => v)).toEqual([{ k: "a", v: 3 }]); // only the live log's record
    expect([...fromOwner].sort()).toEqual([
      ["a", 3],
      ["b", 2],
      ["z", 9],
    ]);
    await own.j.close();

    // the owner declines: the snapshot's lines are read as usual
    const declined = await openMap(d, { loadSnapshot: async () => false });
    expect([...declined.state].sort()).toEqual([
      ["a", 3],
      ["b", 2],
    ]);
    await declined.j.close();
  });
});
