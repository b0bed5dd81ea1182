import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SwitchboardError } from "../../../src/errors.js";
import { silentLogger } from "../../../src/log.js";
import {
  createLocalPipeline,
  type LocalPipeline,
  type LocalPipelineOptions,
} from "../../../src/pipeline/local/index.js";
import type { JobHandlers, TurnJob } from "../../../src/pipeline/types.js";
import { latch, msg, pipelineContract, recorder } from "../../contract/pipeline.js";
import { MemoryRunStore } from "../../helpers/memory-store.js";
import { eventually, hangingOnFinalWrite, runsWith, tempDir } from "../../helpers.js";

pipelineContract("local", async ({ mode, concurrency }) => {
  const { dir, cleanup } = tempDir("sb-pipe-");
  const runs = new MemoryRunStore();
  const make = () => createLocalPipeline({ stateDir: dir, runs, logger: silentLogger(), concurrency, mode });
  return { pipeline: make(), restart: async () => make(), cleanup: async () => cleanup() };
});

// -------------------------------------------------------------------------------------------------
// local-only behaviour: the journal file, crash recovery without a clean stop, tunables

const journalPath = (dir: string) => path.join(dir, "queue", "journal.jsonl");
/** Every queue journal file (snapshot, rotated logs, live log) in the order replay reads them. */
const journalFiles = (dir: string) => {
  const q = path.join(dir, "queue");
  const names = readdirSync(q).filter((f) => /^journal\.(snapshot|\d+)?\.?jsonl$/.test(f));
  const gen = (f: string) =>
    f.includes("snapshot") ? -1 : f === "journal.jsonl" ? Infinity : Number(f.split(".")[1]);
  return names.sort((a, b) => gen(a) - gen(b)).map((f) => path.join(q, f));
};
/** The records of every queue journal file (headers left out). */
const journalRecords = (dir: string) =>
  journalFiles(dir)
    .flatMap((f) => readFileSync(f, "utf8").trim().split("\n"))
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as { t?: string; runId?: string })
    .filter((r) => r.t !== undefined);

describe("local pipeline driver", () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  function env(extra: Partial<LocalPipelineOptions> = {}) {
    const { dir, cleanup } = tempDir("sb-pipe-local-");
    cleanups.push(cleanup);
    const runs = new MemoryRunStore();
    const make = (more: Partial<LocalPipelineOptions> = {}): LocalPipeline => {
      const p = createLocalPipeline({
        stateDir: dir,
        runs,
        logger: silentLogger(),
        concurrency: 4,
        mode: "followup",
        ...extra,
        ...more,
      });
      cleanups.push(() => p.stop(100));
      return p;
    };
    return { dir, runs, make };
  }

  it("journals a turn before submitTurn resolves", async () => {
    const { dir, make } = env();
    const p = make();
    const rec = await p.submitTurn(msg("s", "durable?"));
    const lines = readFileSync(journalPath(dir), "utf8").trim().split("\n");
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({
        t: "turn",
        runId: rec.runId,
        req: expect.objectContaining({ text: "durable?" }),
      }),
    );
  });

  it("tolerates a torn last line: drops it, cuts the file back, and keeps appending cleanly", async () => {
    const { dir, runs, make } = env();
    mkdirSync(path.join(dir, "queue"), { recursive: true });
    const good = { t: "turn", runId: "r-good", createdAt: 1, req: msg("s", "survivor") };
    await runs.put({ runId: "r-good", sessionKey: "s", agentId: "main", status: "queued", createdAt: 1 });
    writeFileSync(journalPath(dir), `${JSON.stringify(good)}\n{"t":"turn","runId":"r-torn","crea`);
    const p = make();
    const { jobs, handlers } = recorder();
    await p.start(handlers);
    expect((await p.wait("r-good", 5000))?.status).toBe("ok");
    expect(jobs.map((j) => j.runId)).toEqual(["r-good"]);
    expect(p.warnings().join("\n")).toMatch(/torn/);
    const after = await p.submitTurn(msg("s", "after"));
    await p.wait(after.runId, 5000);
    await p.stop();
    const text = readFileSync(journalPath(dir), "utf8");
    expect(text).not.toContain("r-torn");
    for (const line of text.trim().split("\n")) expect(() => JSON.parse(line)).not.toThrow();
  });

  it("skips an unreadable line in the middle and replays the rest", async () => {
    const { dir, runs, make } = env();
    mkdirSync(path.join(dir, "queue"), { recursive: true });
    const a = { t: "turn", runId: "r-a", createdAt: 1, req: msg("s", "a") };
    const b = { t: "turn", runId: "r-b", createdAt: 2, req: msg("s", "b") };
    writeFileSync(journalPath(dir), `${JSON.stringify(a)}\nnot json\n{"t":"nope"}\n${JSON.stringify(b)}\n`);
    const p = make();
    const { jobs, handlers } = recorder();
    await p.start(handlers);
    expect((await p.wait("r-b", 5000))?.status).toBe("ok");
    expect(jobs.map((j) => j.messages[0]!.text)).toEqual(["a", "b"]);
    expect(p.warnings()).toHaveLength(2);
    // The run records were missing (accepted, then a crash before the RunStore write): recreated.
    expect(await runs.get("r-a")).toMatchObject({ status: "ok", sessionKey: "s" });
  });

  it("re-runs a turn that was running when the process died, with attempt incremented", async () => {
    const { dir, make } = env();
    mkdirSync(path.join(dir, "queue"), { recursive: true });
    const lines = [
      { t: "turn", runId: "r1", createdAt: 1, req: msg("s", "one") },
      { t: "turn", runId: "r2", createdAt: 2, req: msg("s", "two") },
      { t: "start", runIds: ["r1"] },
    ];
    writeFileSync(journalPath(dir), `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`);
    const p = make();
    const { jobs, handlers } = recorder();
    await p.start(handlers);
    await p.wait("r2", 5000);
    expect(jobs.map((j) => [j.runId, j.attempt])).toEqual([
      ["r1", 2],
      ["r2", 1],
    ]);
  });

  it("does not re-run a turn whose outcome reached the RunStore but whose done record was lost", async () => {
    const { dir, runs, make } = env();
    mkdirSync(path.join(dir, "queue"), { recursive: true });
    await runs.put({
      runId: "r1",
      sessionKey: "s",
      agentId: "main",
      status: "ok",
      createdAt: 1,
      reply: "kept",
    });
    writeFileSync(
      journalPath(dir),
      `${JSON.stringify({ t: "turn", runId: "r1", createdAt: 1, req: msg("s", "one") })}\n${JSON.stringify({ t: "start", runIds: ["r1"] })}\n`,
    );
    const p = make();
    const { jobs, handlers } = recorder();
    await p.start(handlers);
    const later = await p.submitTurn(msg("s", "two"));
    await p.wait(later.runId, 5000);
    expect(jobs.map((j) => j.messages[0]!.text)).toEqual(["two"]);
    expect((await runs.get("r1"))?.reply).toBe("kept");
  });

  it("a sequential turn costs the journal one write: its start and done ride with the next turn's append", async () => {
    const { dir, make } = env();
    const p = make();
    // the model call: the turn's records are written in phases of their own, as in a gateway
    const model = () => new Promise<void>((r) => setTimeout(r, 1));
    await p.start({
      turn: async (job) => {
        await model();
        return { status: "ok", reply: `r:${job.messages[0]!.text}` };
      },
      background: async () => {},
    });
    const first = await p.submitTurn(msg("s", "warm"));
    await p.wait(first.runId, 5000);
    const before = p.journalStats();
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const rec = await p.submitTurn(msg("s", `turn ${i}`));
      ids.push(rec.runId);
      expect((await p.wait(rec.runId, 5000))?.status).toBe("ok");
    }
    const after = p.journalStats();
    // 3 a turn (turn, start, done) before; now the turn's append carries the last one's two notes
    expect(after.writes - before.writes).toBeLessThanOrEqual(21);
    expect(after.syncs - before.syncs).toBe(20);
    await p.stop(1000); // writes the last turn's start and done instead of dropping them
    const records = journalRecords(dir);
    for (const id of [first.runId, ...ids]) {
      expect(records.filter((r) => r.t === "turn" && r.runId === id)).toHaveLength(1);
      expect(records.some((r) => r.t === "done" && (r as { runIds?: string[] }).runIds?.includes(id))).toBe(
        true,
      );
    }
  });

  it("a turn writing its outcome lends its slot: the next session's turn runs, the same session's waits, and at most `concurrency` turns finish at once", async () => {
    // final writes hang until the test lets them go
    const store = new MemoryRunStore();
    const release = latch();
    const finalWrites: string[] = [];
    const runs = runsWith(store, {
      patch: async (id, patch) => {
        if (patch.status === "ok") {
          finalWrites.push(id);
          await release.promise;
        }
        return store.patch(id, patch);
      },
    });
    const { make } = env({ runs, concurrency: 1 });
    const p = make();
    const started: string[] = [];
    await p.start({
      turn: async (job) => {
        started.push(job.messages[0]!.text);
        return { status: "ok", reply: "r" };
      },
      background: async () => {},
    });
    const a1 = await p.submitTurn(msg("a", "a1"));
    const a2 = await p.submitTurn(msg("a", "a2"));
    const b1 = await p.submitTurn(msg("b", "b1"));
    const c1 = await p.submitTurn(msg("c", "c1"));
    // a1's handler returned and its outcome is being written: its slot runs b1, while a2 (same
    // session) waits for a1's write; b1 is then writing too, and one finishing turn is the limit
    // at concurrency 1, so b1 keeps its slot and c1 waits
    await eventually(() => finalWrites.length === 2);
    await new Promise((r) => setTimeout(r, 20));
    expect(started).toEqual(["a1", "b1"]);
    expect((await p.wait(a1.runId, 10))?.status).toBe("running");
    release.open();
    for (const rec of [a1, a2, b1, c1]) expect((await p.wait(rec.runId, 5000))?.status).toBe("ok");
    expect(started.slice(2).sort()).toEqual(["a2", "c1"]);
  });

  it("a run record lost in a crash after the accept (it rides with a later write) is put back as queued by the restart", async () => {
    const { runs, make } = env();
    // the store never writes the accepted turn's record: as if the crash came before its write
    const losing = runsWith(runs, { putSoon: async () => {} });
    const first = make({ runs: losing });
    const rec = await first.submitTurn(msg("s", "lost record"));
    expect(rec.status).toBe("queued");
    expect(await runs.get(rec.runId)).toBeNull();
    await first.stop(100);
    const second = make();
    expect((await second.queueInfo("s")).pending).toBe(1);
    expect(await runs.get(rec.runId)).toMatchObject({ status: "queued", sessionKey: "s" });
    const { handlers } = recorder();
    await second.start(handlers);
    expect((await second.wait(rec.runId, 5000))?.status).toBe("ok");
  });

  it("compacts the journal in the background and keeps every live entry", async () => {
    const { dir, make } = env({ compactEveryAppends: 100 });
    const p = make();
    const gateOpen: { open?: () => void } = {};
    const gate = new Promise<void>((r) => {
      gateOpen.open = r;
    });
    const handlers: JobHandlers = {
      turn: async (job, ctx) => {
        if (job.sessionKey === "blocked") {
          await Promise.race([gate, new Promise((r) => ctx.signal.addEventListener("abort", r))]);
          return { status: "aborted" };
        }
        return { status: "ok" };
      },
      background: async () => {},
    };
    await p.start(handlers);
    // Live: one running + two queued turns in "blocked", a delayed job, a completed job id.
    const blocked = [];
    for (const t of ["b1", "b2", "b3"]) blocked.push(await p.submitTurn(msg("blocked", t)));
    await p.submit({ kind: "archive", id: "delayed-1", data: {} }, { delayMs: 60_000 });
    await p.submit({ kind: "archive", id: "done-1", data: {} });
    // Dead: many finished turns.
    const finished = await Promise.all(
      Array.from({ length: 300 }, (_, i) => p.submitTurn(msg(`f${i % 7}`, `x${i}`))),
    );
    await Promise.all(finished.map((r) => p.wait(r.runId, 5000)));
    // Compaction runs in the background after an append crosses the threshold.
    await eventually(() => p.journalStats().compactions > 0);
    // One more after every finished turn is done, so its snapshot holds none of them.
    const c0 = p.journalStats().compactions;
    for (let i = 0; i < 200 && p.journalStats().compactions === c0; i++) {
      await p.wait((await p.submitTurn(msg("fill", `fill${i}`))).runId, 5000);
    }
    expect(p.journalStats().compactions).toBeGreaterThan(c0);
    await p.stop(50);
    const recs = journalRecords(dir);
    // Far fewer records than the ~900 written, and none for the finished turns' lifecycle.
    expect(recs.length).toBeLessThan(200);
    expect(recs.some((r) => r.t === "turn" && finished.some((f) => f.runId === r.runId))).toBe(false);

    const p2 = make();
    const seen: Array<[string, number]> = [];
    const jobsSeen: string[] = [];
    const probed = latch();
    await p2.start({
      turn: async (job) => {
        seen.push([job.messages[0]!.text, job.attempt]);
        return { status: "ok" };
      },
      background: async (job) => {
        jobsSeen.push(job.id);
        if (job.id === "probe") probed.open();
      },
    });
    await Promise.all(blocked.map((b) => p2.wait(b.runId, 5000)));
    expect(seen).toEqual([
      ["b1", 2],
      ["b2", 1],
      ["b3", 1],
    ]);
    await p2.submit({ kind: "archive", id: "done-1", data: {} });
    await p2.submit({ kind: "archive", id: "probe", data: {} });
    await probed.promise;
    expect(jobsSeen).toEqual(["probe"]);
    expect(await p2.queueInfo("blocked")).toEqual({ pending: 0 });
    // The delayed job is still pending (due in a minute): it must be in the journal.
    await p2.stop(50);
    expect(
      journalFiles(dir)
        .map((f) => readFileSync(f, "utf8"))
        .join(""),
    ).toContain("delayed-1");
  });

  it("a delayed job restored by a restart fires at its original due time, not a full delay later", async () => {
    // The clock jumps at the restart as if the process had been down 300 ms: no sleeping, and
    // the order against markers on the new instance's own timers says when "due" fired.
    let downMs = 0;
    const { make } = env({ now: () => Date.now() + downMs });
    const p1 = make();
    await p1.submit({ kind: "archive", id: "due", data: {} }, { delayMs: 600 });
    await p1.submit({ kind: "archive", id: "overdue", data: {} }, { delayMs: 1 });
    await p1.stop();
    downMs = 300;
    const p2 = make();
    const order: string[] = [];
    const all = latch();
    await p2.start({
      turn: async () => ({ status: "ok" }),
      background: async (job) => {
        order.push(job.id);
        if (order.length === 4) all.open();
      },
    });
    await p2.submit({ kind: "archive", id: "marker-100", data: {} }, { delayMs: 100 });
    await p2.submit({ kind: "archive", id: "marker-500", data: {} }, { delayMs: 500 });
    await all.promise;
    // Overdue at restart: at once. "due" had ~300 ms left: after the 100 ms marker (not at once),
    // before the 500 ms one (not a full 600 ms after the restart).
    expect(order).toEqual(["overdue", "marker-100", "due", "marker-500"]);
  });

  it("stop() returns even if a handler ignores the abort, and that turn runs again after restart", async () => {
    const { make } = env({ abortSettleMs: 20 });
    const p1 = make();
    let startedOnce!: () => void;
    const started = new Promise<void>((r) => {
      startedOnce = r;
    });
    await p1.start({
      turn: () => {
        startedOnce();
        return new Promise(() => {}); // never settles, ignores the signal
      },
      background: async () => {},
    });
    const r = await p1.submitTurn(msg("s", "stuck"));
    await started;
    await p1.stop(20);
    const p2 = make();
    const { jobs, handlers } = recorder();
    await p2.start(handlers);
    expect((await p2.wait(r.runId, 5000))?.status).toBe("ok");
    expect(jobs.map((j) => [j.runId, j.attempt])).toEqual([[r.runId, 2]]);
  });

  it("retries a failing background job with backoff, then drops it and remembers the id", async () => {
    const { make } = env({ retryBaseMs: 5, jobMaxAttempts: 3 });
    const p = make();
    let calls = 0;
    const third = latch();
    const probed = latch();
    await p.start({
      turn: async () => ({ status: "ok" }),
      background: async (job) => {
        if (job.id === "probe") return probed.open();
        calls++;
        if (calls === 3) third.open();
        throw new Error("flaky");
      },
    });
    await p.submit({ kind: "announce", id: "flaky-1", data: {} });
    await third.promise;
    // Submitted again after it was dropped: the id is remembered, so it does not run again. The
    // probe, due later than any retry would be, proves nothing else ran in between.
    await p.submit({ kind: "announce", id: "flaky-1", data: {} });
    await p.submit({ kind: "archive", id: "probe", data: {} }, { delayMs: 30 });
    await probed.promise;
    expect(calls).toBe(3);
  });

  it("validates its options, naming the field", () => {
    expect(() =>
      createLocalPipeline({
        stateDir: "/tmp/x",
        runs: new MemoryRunStore(),
        logger: silentLogger(),
        concurrency: 0,
        mode: "collect",
      }),
    ).toThrow(/queue\.concurrency/);
  });

  it("a synchronously throwing handler and an invalid result both end as error", async () => {
    const { make } = env();
    const p = make();
    await p.start({
      turn: (job) => {
        if (job.messages[0]!.text === "sync") throw new Error("sync throw");
        return Promise.resolve(undefined as unknown as { status: "ok" });
      },
      background: async () => {},
    });
    const a = await p.submitTurn(msg("s", "sync"));
    const b = await p.submitTurn(msg("s", "nothing"));
    expect(await p.wait(a.runId, 5000)).toMatchObject({ status: "error", error: "sync throw" });
    expect((await p.wait(b.runId, 5000))?.status).toBe("error");
  });

  it("a run that stays queued across a restart is still waitable and cancellable there", async () => {
    const { make } = env();
    const p1 = make();
    const r = await p1.submitTurn(msg("s", "never started"));
    await p1.stop();
    const p2 = make();
    expect((await p2.wait(r.runId, 0))?.status).toBe("queued");
    expect(await p2.cancel(r.runId, "aborted")).toBe(true);
    expect((await p2.wait(r.runId, 600_000))?.status).toBe("aborted");
    await p2.stop();
    const p3 = make();
    const { jobs, handlers } = recorder();
    await p3.start(handlers);
    const probe = await p3.submitTurn(msg("s", "probe"));
    await p3.wait(probe.runId, 5000);
    expect(jobs.map((j) => j.messages[0]!.text)).toEqual(["probe"]);
  });

  it("a crash after the commit record (outcome + follow-ups) and before the RunStore write: the restart records that outcome without re-running the turn, and relays the follow-ups once", async () => {
    const { dir, runs, make } = env();
    // The first process dies inside the RunStore write of the final status: it never returns.
    const { runs: dying, reachedFinalWrite } = hangingOnFinalWrite(runs);
    const p1 = make({ runs: dying });
    const caused = async (job: TurnJob) => ({
      status: "ok" as const,
      reply: `caused:${job.attempt}`,
      followUps: [
        { type: "job" as const, job: { kind: "archive" as const, id: `fu:${job.runId}`, data: {} } },
        {
          type: "turn" as const,
          turn: { ...msg("t", "next", { origin: "announce" }), runId: `${job.runId}:next` },
        },
      ],
    });
    await p1.start({ turn: caused, background: async () => {} });
    const rec = await p1.submitTurn(msg("s", "cause"));
    await reachedFinalWrite;
    expect((await runs.get(rec.runId))?.status).toBe("running");
    const journal = readFileSync(journalPath(dir), "utf8");
    expect(journal).toContain('"t":"final"');

    // A new process over the same state dir (the old one is never stopped: it crashed).
    const turns: string[] = [];
    const jobs: string[] = [];
    const nextRan = latch();
    const sentinel = latch();
    const p2 = make();
    await p2.start({
      turn: async (job) => {
        turns.push(job.messages[0]!.text);
        if (job.runId === `${rec.runId}:next`) nextRan.open();
        return { status: "ok", reply: "ran" };
      },
      background: async (job) => {
        if (job.id === "sentinel") sentinel.open();
        else jobs.push(job.id);
      },
    });
    expect(await p2.wait(rec.runId, 5000)).toMatchObject({ status: "ok", reply: "caused:1" });
    await nextRan.promise;
    await p2.submit({ kind: "archive", id: "sentinel", data: {} }, { delayMs: 20 });
    await sentinel.promise;
    expect(turns).toEqual(["next"]);
    expect(jobs).toEqual([`fu:${rec.runId}`]);
  });

  it("a RunStore write that fails after the commit does not turn the committed outcome into error", async () => {
    const { runs, make } = env();
    let failures = 1;
    const flaky = runsWith(runs, {
      patch: async (id, patch) => {
        if (patch.status === "ok" && failures-- > 0) throw new SwitchboardError("UNAVAILABLE", "store blip");
        return runs.patch(id, patch);
      },
    });
    const ran = latch();
    const jobs: string[] = [];
    const p = make({ runs: flaky });
    await p.start({
      turn: async (job) => ({
        status: "ok",
        reply: "committed",
        followUps: [{ type: "job", job: { kind: "archive", id: `fu:${job.runId}`, data: {} } }],
      }),
      background: async (job) => {
        jobs.push(job.id);
        ran.open();
      },
    });
    const rec = await p.submitTurn(msg("s", "x"));
    expect(await p.wait(rec.runId, 5000)).toMatchObject({ status: "ok", reply: "committed" });
    await ran.promise;
    expect(jobs).toEqual([`fu:${rec.runId}`]);
  });
});
