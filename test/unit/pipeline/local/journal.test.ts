import { readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../../src/log.js";
import { JOURNAL_FILE, Journal } from "../../../../src/pipeline/local/journal.js";
import type { JournalModel } from "../../../../src/pipeline/local/journal-model.js";
import type { JournalRecord } from "../../../../src/pipeline/local/schema.js";
import { tempDir } from "../../../helpers.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function dir(): string {
  const t = tempDir("sb-journal-");
  cleanups.push(t.cleanup);
  return t.dir;
}

const open = (d: string, extra: { compactAfterBytes?: number; completedCap?: number } = {}) =>
  Journal.open({
    dir: d,
    logger: silentLogger(),
    fsync: false,
    compactAfterBytes: extra.compactAfterBytes ?? 1 << 30,
    completedCap: extra.completedCap ?? 100,
  });

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

describe("Journal", () => {
  it("writes every append of one tick with a single write", async () => {
    const d = dir();
    const j = await open(d);
    const before = j.stats().writes;
    const all = Array.from({ length: 1000 }, (_, i) => j.append(turn(`r${i}`)));
    await Promise.all(all);
    expect(j.stats().writes - before).toBe(1);
    await j.close();
    const lines = readFileSync(path.join(d, JOURNAL_FILE), "utf8").trim().split("\n");
    expect(lines).toHaveLength(1000);
  });

  it("fdatasyncs a batch only when it holds an awaited record (notes alone are just written)", async () => {
    const d = dir();
    const j = await Journal.open({
      dir: d,
      logger: silentLogger(),
      fsync: true,
      compactAfterBytes: 1 << 30,
      completedCap: 100,
    });
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
    expect(readFileSync(path.join(d, JOURNAL_FILE), "utf8").trim().split("\n")).toHaveLength(5);
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
    const text = readFileSync(path.join(d, JOURNAL_FILE), "utf8");
    expect(text).not.toContain("dead1");
    expect(text.length).toBeLessThan(200 * (duringIds.length + 3));
    const again = await open(d);
    expect(view(again.model)).toEqual(expected);
    expect(expected.turns.map((t) => t[0])).toEqual(["live1", ...duringIds, "after"]);
    expect(expected.turns[0]?.[1]).toBe(1);
    expect(expected.completed).toEqual(["job-old"]);
    await again.close();
  });

  it("compacts by itself once the file is large and mostly dead", async () => {
    const d = dir();
    const j = await open(d, { compactAfterBytes: 2048 });
    for (let i = 0; i < 200; i++) {
      await j.append(turn(`r${i}`, "z".repeat(40)));
      j.note({ t: "done", runIds: [`r${i}`] });
    }
    await j.append(turn("keep"));
    for (let i = 0; i < 100 && j.stats().compactions === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(j.stats().compactions).toBeGreaterThan(0);
    await j.close();
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
    expect(readFileSync(path.join(d, JOURNAL_FILE), "utf8")).not.toContain("fc");
    await again.close();
  });
});
