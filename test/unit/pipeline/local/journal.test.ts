import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { open as openFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../../../../src/log.js";
import { JOURNAL_FILE, QueueJournal } from "../../../../src/pipeline/local/journal.js";
import type { JournalModel } from "../../../../src/pipeline/local/journal-model.js";
import type { JournalRecord } from "../../../../src/pipeline/local/schema.js";
import { tempDir } from "../../../helpers.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const c of cleanups.splice(0)) c();
});

function dir(): string {
  const t = tempDir("sb-journal-");
  cleanups.push(t.cleanup);
  return t.dir;
}

const open = (
  d: string,
  extra: { compactEveryAppends?: number; completedCap?: number; fsync?: boolean } = {},
) =>
  QueueJournal.open({
    dir: d,
    logger: silentLogger(),
    fsync: extra.fsync ?? false,
    compactEveryAppends: extra.compactEveryAppends ?? 1 << 30,
    completedCap: extra.completedCap ?? 100,
  });

/** The live log's lines, its `{"$log":G}` header left out. */
const liveRecords = (d: string) =>
  readFileSync(path.join(d, JOURNAL_FILE), "utf8")
    .trim()
    .split("\n")
    .filter((l) => !l.startsWith('{"$'));

/** Every file of the queue journal, concatenated (snapshot, rotated logs, live log). */
const allText = (d: string) =>
  readdirSync(d)
    .filter((f) => f.startsWith("journal."))
    .map((f) => readFileSync(path.join(d, f), "utf8"))
    .join("");

const turn = (runId: string, text = "x"): JournalRecord => ({
  t: "turn",
  runId,
  createdAt: 1,
  req: { sessionKey: `s-${runId.length % 3}`, agentId: "main", text, deliver: false, origin: "inbound" },
});

/** What a model holds, comparable with toEqual (ignores byte accounting). */
function view(m: JournalModel) {
  return {
    turns: [...m.turns.values()].map((t) => [t.runId, t.started, t.req.text]),
    jobs: [...m.jobs.values()].map((j) => [j.job.id, j.dueAt, j.attempts]),
    completed: [...m.completed],
  };
}

describe("QueueJournal (the shared journal with the queue model)", () => {
  it("writes every append of one tick with a single write", async () => {
    const d = dir();
    const j = await open(d);
    const before = j.stats().writes;
    const all = Array.from({ length: 1000 }, (_, i) => j.append(turn(`r${i}`)));
    await Promise.all(all);
    expect(j.stats().writes - before).toBe(1);
    await j.close();
    expect(liveRecords(d)).toHaveLength(1000);
  });

  it("fdatasyncs a batch only when it holds an awaited record (notes alone are just written)", async () => {
    const d = dir();
    const j = await open(d, { fsync: true });
    await j.append(turn("r1"));
    const s0 = j.stats();
    expect(s0.syncs).toBe(1);
    j.note({ t: "start", runIds: ["r1"] });
    await new Promise((r) => setImmediate(r));
    await j.append(turn("r2")); // a batch of its own: the note's batch was already written
    const s1 = j.stats();
    expect(s1.writes - s0.writes).toBe(2);
    expect(s1.syncs - s0.syncs).toBe(1);
    j.note({ t: "done", runIds: ["r1"] });
    await j.append(turn("r3")); // same tick: one write, synced once, covering the note too
    const s2 = j.stats();
    expect(s2.writes - s1.writes).toBe(1);
    expect(s2.syncs - s1.syncs).toBe(1);
    await j.close();
    expect(liveRecords(d)).toHaveLength(5);
  });

  it("replays to the same live state it had before closing", async () => {
    const d = dir();
    const j = await open(d);
    await j.append(turn("a"));
    await j.append(turn("b"));
    await j.append(turn("c"));
    j.note({ t: "start", runIds: ["a", "b"] });
    j.note({ t: "done", runIds: ["b"] });
    j.note({ t: "job", job: { kind: "archive", id: "j1", data: { x: 1 } }, dueAt: 50, attempts: 0 });
    j.note({ t: "job", job: { kind: "spawn", id: "j2", data: {} }, dueAt: 60, attempts: 0 });
    j.note({ t: "jobretry", id: "j1", dueAt: 99, attempts: 1 });
    j.note({ t: "jobdone", id: "j2" });
    const expected = view(j.model);
    expect(expected).toEqual({
      turns: [
        ["a", 1, "x"],
        ["c", 0, "x"],
      ],
      jobs: [["j1", 99, 1]],
      completed: ["j2"],
    });
    await j.close();
    const again = await open(d);
    expect(view(again.model)).toEqual(expected);
    await again.close();
  });

  it("keeps only the most recent completed ids", async () => {
    const d = dir();
    const j = await open(d, { completedCap: 3 });
    for (const id of ["a", "b", "c", "d"]) j.note({ t: "jobdone", id });
    expect([...j.model.completed]).toEqual(["b", "c", "d"]);
    await j.close();
  });

  it("compaction keeps live records, drops dead ones, and loses nothing appended meanwhile", async () => {
    const d = dir();
    const j = await open(d);
    for (let i = 0; i < 500; i++) await j.append(turn(`dead${i}`, "y".repeat(50)));
    j.note({ t: "done", runIds: Array.from({ length: 500 }, (_, i) => `dead${i}`) });
    await j.append(turn("live1"));
    j.note({ t: "start", runIds: ["live1"] });
    await j.append({ t: "job", job: { kind: "archive", id: "job-live", data: {} }, dueAt: 5, attempts: 0 });
    j.note({ t: "jobdone", id: "job-old" });
    const pendingBefore = j.append(turn("during-a"));
    const compaction = j.compact();
    let compacted = false;
    void compaction.then(() => {
      compacted = true;
    });
    // Appended on every tick while the compaction does its I/O: all must end up in the new file.
    const during = [j.append({ t: "done", runIds: ["during-a"] })];
    const duringIds: string[] = [];
    while (!compacted) {
      duringIds.push(`during-${duringIds.length}`);
      during.push(j.append(turn(duringIds.at(-1)!)));
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all([pendingBefore, compaction, ...during]);
    await j.append(turn("after"));
    expect(j.stats().compactions).toBe(1);
    expect(duringIds.length).toBeGreaterThan(2);
    const expected = view(j.model);
    await j.close();
    const text = allText(d);
    expect(text).not.toContain("dead1");
    expect(text.length).toBeLessThan(200 * (duringIds.length + 3));
    const again = await open(d);
    expect(view(again.model)).toEqual(expected);
    expect(expected.turns.map((t) => t[0])).toEqual(["live1", ...duringIds, "after"]);
    expect(expected.turns[0]?.[1]).toBe(1);
    expect(expected.completed).toEqual(["job-old"]);
    await again.close();
  });

  it("compacts by itself after enough appends, keeping the files proportional to live work", async () => {
    const d = dir();
    const j = await open(d, { compactEveryAppends: 50 });
    // what the records come to as lines (the file size right after the appends is no measure: on
    // a fast machine the compactions keep up with them)
    let written = 0;
    try {
      for (let i = 0; i < 200; i++) {
        const t = turn(`r${i}`, "z".repeat(40));
        const done = { t: "done" as const, runIds: [`r${i}`] };
        written += JSON.stringify(t).length + JSON.stringify(done).length + 2;
        await j.append(t);
        j.note(done);
      }
      await j.append(turn("keep"));
      // ~400 records written (~40 KB). Appends made while a snapshot is written wait for the next
      // one, which starts when it ends: the files settle at a snapshot of live work plus < 50 appends.
      const settled = () => j.stats().fileBytes < 8000;
      for (let i = 0; i < 200 && !settled(); i++) await new Promise((r) => setTimeout(r, 5));
      expect(j.stats().compactions).toBeGreaterThan(0);
      expect(written).toBeGreaterThan(30_000);
      expect(j.stats().fileBytes).toBeLessThan(8000);
    } finally {
      await j.close();
    }
    expect(allText(d).split("\n").length).toBeLessThan(60);
    const again = await open(d);
    expect([...again.model.turns.keys()]).toEqual(["keep"]);
    await again.close();
  });

  it("rejects appends after close", async () => {
    const j = await open(dir());
    await j.close();
    await expect(j.append(turn("late"))).rejects.toThrow(/closed/);
  });

  it("keeps a committed outcome and its unrelayed follow-ups through replay and compaction", async () => {
    const d = dir();
    const j = await open(d);
    await j.append(turn("a"));
    await j.append(turn("b"));
    const fu = (id: string) => ({ type: "job" as const, job: { kind: "archive" as const, id, data: {} } });
    // a: committed, RunStore not written yet, follow-ups not relayed; b: committed and relayed.
    await j.append({
      t: "final",
      runIds: ["a"],
      result: { status: "ok", reply: "A" },
      followUps: [fu("fa")],
    });
    await j.append({ t: "final", runIds: ["b"], result: { status: "error" }, followUps: [fu("fb")] });
    j.note({ t: "relayed", runId: "b" });
    // c: finished and relayed long ago: nothing of it stays live.
    await j.append(turn("c"));
    j.note({ t: "final", runIds: ["c"], result: { status: "ok" }, followUps: [fu("fc")] });
    j.note({ t: "done", runIds: ["c"] });
    j.note({ t: "relayed", runId: "c" });
    const live = (m: JournalModel) => ({
      final: [...m.turns.values()].map((t) => [t.runId, t.final?.status, t.final?.reply]),
      outbox: [...m.outbox.entries()].map(([k, o]) => [
        k,
        o.followUps.map((f) => (f.type === "job" ? f.job.id : "")),
      ]),
    });
    const expected = {
      final: [
        ["a", "ok", "A"],
        ["b", "error", undefined],
      ],
      outbox: [["a", ["fa"]]],
    };
    expect(live(j.model)).toEqual(expected);
    await j.compact();
    await j.close();
    const again = await open(d);
    expect(live(again.model)).toEqual(expected);
    expect(allText(d)).not.toContain("fc");
    await again.close();
  });

  it("a record noted in the tick a compaction starts is counted once (state captured with the last write)", async () => {
    const d = dir();
    const j = await open(d);
    await j.append(turn("r1"));
    // Applied to the model at once; written by the rotation, to the old log, right before the
    // state is captured — so it is in the snapshot and not in the new log as well.
    j.note({ t: "start", runIds: ["r1"] });
    const compaction = j.compact();
    j.note({ t: "jobdone", id: "j-during" }); // same tick: also before the capture
    await compaction;
    j.note({ t: "start", runIds: ["r1"] }); // after: in the new log only
    await j.append(turn("r2"));
    expect(view(j.model).turns).toEqual([
      ["r1", 2, "x"],
      ["r2", 0, "x"],
    ]);
    const expected = view(j.model);
    await j.close();
    const again = await open(d);
    expect(view(again.model)).toEqual(expected);
    await again.close();
  });

  it("replays a journal.jsonl written by the previous format (no header) and continues in the new one", async () => {
    const d = dir();
    // What the former private queue journal wrote: records only, the whole history since its last
    // whole-file rewrite, and maybe the temp file of a rewrite a crash interrupted.
    const legacy: JournalRecord[] = [
      { t: "completed", ids: ["old-1", "old-2"] },
      turn("done-long-ago"),
      turn("queued"),
      turn("running"),
      { t: "start", runIds: ["done-long-ago"] },
      { t: "done", runIds: ["done-long-ago"] },
      { t: "start", runIds: ["running"] },
      { t: "job", job: { kind: "archive", id: "j-delayed", data: { n: 1 } }, dueAt: 500, attempts: 0 },
      { t: "jobretry", id: "j-delayed", dueAt: 900, attempts: 2 },
      { t: "job", job: { kind: "spawn", id: "j-done", data: {} }, dueAt: 1, attempts: 0 },
      { t: "jobdone", id: "j-done" },
      turn("committed"),
      {
        t: "final",
        runIds: ["committed"],
        result: { status: "ok", reply: "R" },
        followUps: [{ type: "job", job: { kind: "archive", id: "fu-1", data: {} } }],
      },
    ];
    writeFileSync(path.join(d, JOURNAL_FILE), `${legacy.map((r) => JSON.stringify(r)).join("\n")}\n`);
    writeFileSync(path.join(d, `${JOURNAL_FILE}.tmp`), '{"t":"turn","runId":"half-written');
    const state = (m: JournalModel) => ({
      ...view(m),
      final: [...m.turns.values()].filter((t) => t.final).map((t) => [t.runId, t.final?.reply]),
      outbox: [...m.outbox.keys()],
    });
    const expected = {
      turns: [
        ["queued", 0, "x"],
        ["running", 1, "x"],
        ["committed", 0, "x"],
      ],
      jobs: [["j-delayed", 900, 2]],
      completed: ["old-1", "old-2", "j-done"],
      final: [["committed", "R"]],
      outbox: ["committed"],
    };

    const j = await open(d);
    expect(state(j.model)).toEqual(expected);
    expect(j.warnings).toEqual([]);
    expect(existsSync(path.join(d, `${JOURNAL_FILE}.tmp`))).toBe(false);
    // it keeps appending to the old file until the first compaction
    await j.append(turn("new"));
    j.note({ t: "done", runIds: ["new"] });
    await j.compact();
    expect(state(j.model)).toEqual(expected);
    await j.append(turn("after"));
    await j.close();

    // now in the shared format: a snapshot of live work only, a live log with a header
    expect(readdirSync(d).sort()).toEqual([JOURNAL_FILE, "journal.snapshot.jsonl"]);
    expect(readFileSync(path.join(d, JOURNAL_FILE), "utf8")).toMatch(/^\{"\$log":2\}\n/);
    const snapshot = readFileSync(path.join(d, "journal.snapshot.jsonl"), "utf8");
    expect(snapshot).toMatch(/^\{"\$snapshot":2\}\n/);
    expect(snapshot).not.toContain("done-long-ago");
    expect(snapshot).not.toContain('"new"');
    const again = await open(d);
    expect(state(again.model)).toEqual({
      ...expected,
      turns: [...expected.turns, ["after", 0, "x"]],
    });
    await again.close();
  });

  it("an append whose fdatasync fails rejects with STORAGE_UNAVAILABLE; undone, it is in neither model nor file", async () => {
    const d = dir();
    const j = await open(d, { fsync: true });
    await j.append(turn("kept"));
    const probe = await openFile(path.join(d, ".probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
    await probe.close();
    vi.spyOn(proto, "datasync").mockRejectedValueOnce(
      Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }),
    );
    const job: JournalRecord = {
      t: "job",
      job: { kind: "archive", id: "j-lost", data: {} },
      dueAt: 1,
      attempts: 0,
    };
    const failed = j.append(job);
    expect(j.model.jobs.has("j-lost")).toBe(true); // applied at add time: duplicates see it at once
    await expect(failed).rejects.toMatchObject({ code: "STORAGE_UNAVAILABLE" });
    j.model.discardJob("j-lost"); // what acceptJob does
    await j.append(turn("after"));
    const expected = view(j.model);
    expect(expected.jobs).toEqual([]);
    await j.close();
    expect(allText(d)).not.toContain("j-lost");
    const again = await open(d);
    expect(view(again.model)).toEqual(expected);
    await again.close();
  });
});
