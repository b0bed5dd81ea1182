import { afterEach, describe, expect, it } from "vitest";
import { InvalidParamsError, SwitchboardError } from "../../src/errors.js";
import {
  type BackgroundJob,
  type JobContext,
  type JobHandlers,
  type Pipeline,
  RetryLaterError,
  type TurnJob,
  type TurnRequest,
  type TurnResult,
  UnrecoverableJobError,
} from "../../src/pipeline/types.js";
import type { RunRecord } from "../../src/store/types.js";

/**
 * The pipeline contract, run against every driver (habit 5). A driver's test file calls
 * `pipelineContract(name, make)`. `make(opts)` returns a NOT yet started pipeline with the given
 * mode and concurrency, over fresh durable state; `restart()` (optional) returns a new instance over
 * the SAME durable state, as a process restart would (the suite stops the old one first);
 * `cleanup()` removes the state. The suite stops every pipeline it started.
 *
 * No assertion depends on wall-clock speed: ordering and parallelism are proven with counters and
 * latches; waits use long timeouts that only matter when the driver is broken.
 */

export interface PipelineHarness {
  pipeline: Pipeline;
  /** Closes the pipeline and opens a new one on the same durable state (journal / Redis). */
  restart: () => Promise<Pipeline>;
  cleanup: () => Promise<void>;
}

export interface PipelineFactoryOptions {
  mode: "collect" | "followup";
  concurrency: number;
}

const LONG = 10_000;

export interface Latch {
  promise: Promise<void>;
  open: () => void;
}

/** A promise the test opens itself: what a handler waits on, or what the test awaits. */
export function latch(): Latch {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((r) => {
    if (signal.aborted) r();
    else signal.addEventListener("abort", () => r(), { once: true });
  });
}

/** Waits for the latch or for the turn being aborted, whichever comes first. */
function gate(l: Latch, ctx: JobContext): Promise<void> {
  return Promise.race([l.promise, untilAborted(ctx.signal)]);
}

/** Polls `fn` until it returns a value; the bound only matters when the driver is broken. */
async function until<T>(fn: () => T | undefined, timeoutMs = LONG): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}

function ticks(n: number): Promise<void> {
  let p = Promise.resolve();
  for (let i = 0; i < n; i++) p = p.then(() => new Promise<void>((r) => setImmediate(r)));
  return p;
}

/** A chat turn request (the driver tests use it too). */
export function msg(sessionKey: string, text: string, extra: Partial<TurnRequest> = {}): TurnRequest {
  return { sessionKey, agentId: "main", text, deliver: false, origin: "inbound", ...extra };
}

/** Handlers that record every turn and reply `r:<texts joined by +>`. */
export function recorder(): { jobs: TurnJob[]; handlers: JobHandlers } {
  const jobs: TurnJob[] = [];
  const handlers: JobHandlers = {
    turn: async (job) => {
      jobs.push(job);
      return { status: "ok", reply: `r:${job.messages.map((m) => m.text).join("+")}` };
    },
    background: async () => {},
  };
  return { jobs, handlers };
}

const noBackground = async () => {};

function handlers(
  turn: JobHandlers["turn"],
  background: JobHandlers["background"] = noBackground,
): JobHandlers {
  return { turn, background };
}

const ok = (reply: string): TurnResult => ({ status: "ok", reply });

export function pipelineContract(
  name: string,
  make: (opts: PipelineFactoryOptions) => Promise<PipelineHarness>,
): void {
  describe(`pipeline contract: ${name}`, () => {
    const started: Pipeline[] = [];
    const harnesses: PipelineHarness[] = [];

    async function setup(opts: Partial<PipelineFactoryOptions> = {}): Promise<PipelineHarness> {
      const h = await make({ mode: opts.mode ?? "followup", concurrency: opts.concurrency ?? 4 });
      harnesses.push(h);
      return h;
    }

    async function run(p: Pipeline, hs: JobHandlers): Promise<Pipeline> {
      started.push(p);
      await p.start(hs);
      return p;
    }

    afterEach(async () => {
      for (const p of started.splice(0)) await p.stop(200);
      for (const h of harnesses.splice(0)) await h.cleanup();
    });

    // -------------------------------------------------------------------------------------------
    describe("lanes", () => {
      const shapes = [
        { mode: "followup", sessions: 12, concurrency: 4 },
        { mode: "collect", sessions: 12, concurrency: 4 },
        // More slots than sessions: a lane that is busy must not be taken again by a free slot.
        { mode: "followup", sessions: 3, concurrency: 8 },
        { mode: "collect", sessions: 3, concurrency: 8 },
      ] as const;
      for (const { mode, sessions, concurrency } of shapes) {
        it(`${mode}, ${sessions} sessions, concurrency ${concurrency}: one session's turns never overlap and run in arrival order`, async () => {
          const h = await setup({ mode, concurrency });
          const active = new Map<string, number>();
          const seen = new Map<string, string[]>();
          let overlaps = 0;
          let running = 0;
          let maxRunning = 0;
          await run(
            h.pipeline,
            handlers(async (job) => {
              running++;
              maxRunning = Math.max(maxRunning, running);
              if ((active.get(job.sessionKey) ?? 0) > 0) overlaps++;
              active.set(job.sessionKey, (active.get(job.sessionKey) ?? 0) + 1);
              const list = seen.get(job.sessionKey) ?? [];
              for (const m of job.messages) list.push(m.text);
              seen.set(job.sessionKey, list);
              await ticks(2);
              active.set(job.sessionKey, active.get(job.sessionKey)! - 1);
              running--;
              return ok(job.messages.map((m) => m.text).join(","));
            }),
          );
          const perSession = 10;
          const submits: Promise<RunRecord>[] = [];
          for (let i = 0; i < perSession; i++) {
            for (let s = 0; s < sessions; s++) submits.push(h.pipeline.submitTurn(msg(`s${s}`, `${i}`)));
          }
          const records = await Promise.all(submits);
          for (const r of records) expect(r.status).toBe("queued");
          const finals = await Promise.all(records.map((r) => h.pipeline.wait(r.runId, LONG)));
          for (const f of finals) expect(f?.status).toBe("ok");
          expect(overlaps).toBe(0);
          expect(maxRunning).toBeLessThanOrEqual(concurrency);
          const expected = Array.from({ length: perSession }, (_, i) => `${i}`);
          for (let s = 0; s < sessions; s++) expect(seen.get(`s${s}`)).toEqual(expected);
        });
      }

      it("different sessions run at the same time", async () => {
        const h = await setup({ concurrency: 4 });
        let arrived = 0;
        const both = latch();
        await run(
          h.pipeline,
          handlers(async (_job, ctx) => {
            arrived++;
            if (arrived === 2) both.open();
            await gate(both, ctx);
            return ok(arrived === 2 && !ctx.signal.aborted ? "met" : "alone");
          }),
        );
        const a = await h.pipeline.submitTurn(msg("a", "x"));
        const b = await h.pipeline.submitTurn(msg("b", "y"));
        const [ra, rb] = await Promise.all([h.pipeline.wait(a.runId, LONG), h.pipeline.wait(b.runId, LONG)]);
        expect(ra?.reply).toBe("met");
        expect(rb?.reply).toBe("met");
      });

      it("never runs more jobs at once than the concurrency", async () => {
        const h = await setup({ concurrency: 2 });
        const release = latch();
        const twoStarted = latch();
        let startedCount = 0;
        await run(
          h.pipeline,
          handlers(async (job, ctx) => {
            startedCount++;
            if (startedCount === 2) twoStarted.open();
            await gate(release, ctx);
            return ok(job.sessionKey);
          }),
        );
        const recs = await Promise.all([0, 1, 2, 3, 4].map((i) => h.pipeline.submitTurn(msg(`c${i}`, "go"))));
        await twoStarted.promise;
        await ticks(10);
        expect(startedCount).toBe(2);
        release.open();
        const finals = await Promise.all(recs.map((r) => h.pipeline.wait(r.runId, LONG)));
        expect(finals.map((f) => f?.status)).toEqual(["ok", "ok", "ok", "ok", "ok"]);
        expect(startedCount).toBe(5);
      });

      it("a session with a long backlog does not starve another session", async () => {
        const h = await setup({ concurrency: 1 });
        const order: string[] = [];
        const firstGate = latch();
        await run(
          h.pipeline,
          handlers(async (job, ctx) => {
            order.push(job.sessionKey);
            if (order.length === 1) await gate(firstGate, ctx);
            return ok("");
          }),
        );
        const backlog = Array.from({ length: 50 }, (_, i) => h.pipeline.submitTurn(msg("busy", `${i}`)));
        const other = h.pipeline.submitTurn(msg("quiet", "hello"));
        await Promise.all([...backlog, other]);
        firstGate.open();
        const rec = await h.pipeline.wait((await other).runId, LONG);
        expect(rec?.status).toBe("ok");
        expect(order.indexOf("quiet")).toBeGreaterThan(0);
        expect(order.indexOf("quiet")).toBeLessThan(10);
      });

      it("collect mode folds pending chat messages into one turn; other origins stay separate", async () => {
        const h = await setup({ mode: "collect" });
        const turns: TurnJob[] = [];
        const first = latch();
        const firstStarted = latch();
        await run(
          h.pipeline,
          handlers(async (job, ctx) => {
            turns.push(job);
            if (turns.length === 1) {
              firstStarted.open();
              await gate(first, ctx);
            }
            return ok(`reply:${job.messages.map((m) => m.text).join("+")}`);
          }),
        );
        const r1 = await h.pipeline.submitTurn(msg("s", "m1"));
        await firstStarted.promise;
        const rest = await Promise.all([
          h.pipeline.submitTurn(msg("s", "m2")),
          h.pipeline.submitTurn(msg("s", "m3")),
          h.pipeline.submitTurn(msg("s", "m4")),
          h.pipeline.submitTurn(msg("s", "m5", { origin: "a2a" })),
          h.pipeline.submitTurn(msg("s", "m6", { origin: "cron" })),
          h.pipeline.submitTurn(msg("s", "m7")),
        ]);
        expect((await h.pipeline.queueInfo("s")).pending).toBe(6);
        first.open();
        const finals = await Promise.all([r1, ...rest].map((r) => h.pipeline.wait(r.runId, LONG)));
        expect(turns.map((t) => t.messages.map((m) => m.text))).toEqual([
          ["m1"],
          ["m2", "m3", "m4"],
          ["m5"],
          ["m6"],
          ["m7"],
        ]);
        expect(turns[1]!.runId).toBe(rest[0]!.runId);
        expect(turns[1]!.messages.map((m) => m.runId)).toEqual(rest.slice(0, 3).map((r) => r.runId));
        for (const f of finals.slice(1, 4)) {
          expect(f?.status).toBe("ok");
          expect(f?.reply).toBe("reply:m2+m3+m4");
        }
        expect(finals[4]?.reply).toBe("reply:m5");
      });

      it("followup mode runs one message per turn", async () => {
        const h = await setup({ mode: "followup" });
        const turns: string[][] = [];
        const first = latch();
        const firstStarted = latch();
        await run(
          h.pipeline,
          handlers(async (job, ctx) => {
            turns.push(job.messages.map((m) => m.text));
            if (turns.length === 1) {
              firstStarted.open();
              await gate(first, ctx);
            }
            return ok("");
          }),
        );
        const r1 = await h.pipeline.submitTurn(msg("s", "m1"));
        await firstStarted.promise;
        const rest = await Promise.all(["m2", "m3"].map((t) => h.pipeline.submitTurn(msg("s", t))));
        first.open();
        await Promise.all([r1, ...rest].map((r) => h.pipeline.wait(r.runId, LONG)));
        expect(turns).toEqual([["m1"], ["m2"], ["m3"]]);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe("run lifecycle", () => {
      it("records queued → running → ok with reply, usage and model, and emits events", async () => {
        const h = await setup();
        const events: string[] = [];
        h.pipeline.onRunEvent((e) => events.push(`${e.type}:${e.run.status}`));
        let seenRunning: RunRecord | null = null;
        let runId = "";
        await run(
          h.pipeline,
          handlers(async (job) => {
            seenRunning = await h.pipeline.wait(job.runId, 0);
            return { status: "ok", reply: "hi", usage: { input: 3, output: 5 }, model: "scripted/x" };
          }),
        );
        const rec = await h.pipeline.submitTurn(msg("s", "hello", { deliver: true, origin: "operator" }));
        runId = rec.runId;
        expect(rec).toMatchObject({ sessionKey: "s", agentId: "main", status: "queued", origin: "operator" });
        const fin = await h.pipeline.wait(runId, LONG);
        expect(seenRunning).toMatchObject({ runId, status: "running" });
        expect(fin).toMatchObject({ runId, status: "ok", reply: "hi", model: "scripted/x", deliver: true });
        expect(fin?.usage).toEqual({ input: 3, output: 5 });
        expect(fin?.startedAt).toBeTypeOf("number");
        expect(fin?.endedAt).toBeGreaterThanOrEqual(fin?.startedAt ?? Number.POSITIVE_INFINITY);
        expect(events).toEqual(["run.started:running", "run.finished:ok"]);
      });

      it("a throwing handler ends the run as error and the lane keeps going", async () => {
        const h = await setup();
        await run(
          h.pipeline,
          handlers(async (job) => {
            if (job.messages[0]!.text === "boom") throw new Error("kaput: model exploded");
            return ok("fine");
          }),
        );
        const bad = await h.pipeline.submitTurn(msg("s", "boom"));
        const good = await h.pipeline.submitTurn(msg("s", "next"));
        const [fb, fg] = await Promise.all([
          h.pipeline.wait(bad.runId, LONG),
          h.pipeline.wait(good.runId, LONG),
        ]);
        expect(fb?.status).toBe("error");
        expect(fb?.error).toContain("kaput: model exploded");
        expect(fg).toMatchObject({ status: "ok", reply: "fine" });
      });

      it("timeoutMs aborts the turn's signal and ends the run as timeout", async () => {
        const h = await setup();
        let sawAbort = false;
        await run(
          h.pipeline,
          handlers(async (_job, ctx) => {
            await untilAborted(ctx.signal);
            sawAbort = ctx.signal.aborted;
            return ok("too late");
          }),
        );
        const rec = await h.pipeline.submitTurn(msg("s", "slow", { timeoutMs: 20 }));
        const fin = await h.pipeline.wait(rec.runId, LONG);
        expect(fin?.status).toBe("timeout");
        expect(sawAbort).toBe(true);
      });

      it("a second submit with the same runId returns the first record and runs once", async () => {
        const h = await setup();
        let calls = 0;
        await run(
          h.pipeline,
          handlers(async () => {
            calls++;
            return ok("once");
          }),
        );
        const [a, b] = await Promise.all([
          h.pipeline.submitTurn(msg("s", "x", { runId: "fixed-run-1" })),
          h.pipeline.submitTurn(msg("s", "x", { runId: "fixed-run-1" })),
        ]);
        expect(a.runId).toBe("fixed-run-1");
        expect(b.runId).toBe("fixed-run-1");
        expect((await h.pipeline.wait("fixed-run-1", LONG))?.status).toBe("ok");
        const again = await h.pipeline.submitTurn(msg("s", "x", { runId: "fixed-run-1" }));
        expect(again).toMatchObject({ runId: "fixed-run-1", status: "ok", reply: "once" });
        // A later distinct run in the same lane proves nothing else was queued for fixed-run-1.
        const later = await h.pipeline.submitTurn(msg("s", "y"));
        await h.pipeline.wait(later.runId, LONG);
        expect(calls).toBe(2);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe("wait", () => {
      it("returns at once for a run that finished before the wait began", async () => {
        const h = await setup();
        await run(
          h.pipeline,
          handlers(async () => ok("done")),
        );
        const rec = await h.pipeline.submitTurn(msg("s", "x"));
        await h.pipeline.wait(rec.runId, LONG);
        // A 10-minute timeout would fail the test by its own timeout if the record were not read first.
        const again = await h.pipeline.wait(rec.runId, 600_000);
        expect(again).toMatchObject({ status: "ok", reply: "done" });
      });

      it("times out with the run still running, without cancelling it", async () => {
        const h = await setup();
        const release = latch();
        const startedL = latch();
        let aborted = false;
        await run(
          h.pipeline,
          handlers(async (_job, ctx) => {
            startedL.open();
            await gate(release, ctx);
            aborted = ctx.signal.aborted;
            return ok("finished anyway");
          }),
        );
        const rec = await h.pipeline.submitTurn(msg("s", "x"));
        await startedL.promise;
        const mid = await h.pipeline.wait(rec.runId, 20);
        expect(mid?.status).toBe("running");
        release.open();
        const fin = await h.pipeline.wait(rec.runId, LONG);
        expect(fin).toMatchObject({ status: "ok", reply: "finished anyway" });
        expect(aborted).toBe(false);
      });

      it("returns null for an unknown run", async () => {
        const h = await setup();
        await run(
          h.pipeline,
          handlers(async () => ok("")),
        );
        expect(await h.pipeline.wait("no-such-run", 600_000)).toBeNull();
      });
    });

    // -------------------------------------------------------------------------------------------
    describe("cancel and steer", () => {
      it("cancels a queued run: removed from the lane, never started, ends aborted", async () => {
        const h = await setup();
        const release = latch();
        const startedL = latch();
        const texts: string[] = [];
        await run(
          h.pipeline,
          handlers(async (job, ctx) => {
            texts.push(...job.messages.map((m) => m.text));
            startedL.open();
            await gate(release, ctx);
            return ok("");
          }),
        );
        const a = await h.pipeline.submitTurn(msg("s", "a"));
        await startedL.promise;
        const b = await h.pipeline.submitTurn(msg("s", "b"));
        expect(await h.pipeline.queueInfo("s")).toEqual({ pending: 1, activeRunId: a.runId });
        expect(await h.pipeline.cancel(b.runId, "aborted")).toBe(true);
        expect((await h.pipeline.wait(b.runId, 600_000))?.status).toBe("aborted");
        expect((await h.pipeline.queueInfo("s")).pending).toBe(0);
        expect(await h.pipeline.cancel(b.runId, "aborted")).toBe(false);
        release.open();
        expect((await h.pipeline.wait(a.runId, LONG))?.status).toBe("ok");
        expect(texts).toEqual(["a"]);
        expect(await h.pipeline.cancel(a.runId, "aborted")).toBe(false);
        expect(await h.pipeline.cancel("no-such-run", "aborted")).toBe(false);
      });

      for (const reason of ["aborted", "timeout"] as const) {
        it(`cancels a running run (${reason}): the signal aborts and the status is forced`, async () => {
          const h = await setup();
          const startedL = latch();
          await run(
            h.pipeline,
            handlers(async (_job, ctx) => {
              startedL.open();
              await untilAborted(ctx.signal);
              return ok("returned ok after abort");
            }),
          );
          const rec = await h.pipeline.submitTurn(msg("s", "x"));
          await startedL.promise;
          expect(await h.pipeline.cancel(rec.runId, reason)).toBe(true);
          const fin = await h.pipeline.wait(rec.runId, LONG);
          expect(fin?.status).toBe(reason);
          expect(await h.pipeline.cancel(rec.runId, reason)).toBe(false);
        });
      }

      it("steer queues text for the running turn only", async () => {
        const h = await setup();
        const release = latch();
        const startedL = latch();
        await run(
          h.pipeline,
          handlers(async (job, ctx) => {
            if (job.sessionKey !== "s") return ok("");
            startedL.open();
            await gate(release, ctx);
            return ok(ctx.takeSteering().join("|"));
          }),
        );
        const rec = await h.pipeline.submitTurn(msg("s", "x"));
        await startedL.promise;
        const queuedRun = await h.pipeline.submitTurn(msg("s", "later"));
        expect(await h.pipeline.steer(rec.runId, "go left")).toBe(true);
        expect(await h.pipeline.steer(rec.runId, "then right")).toBe(true);
        expect(await h.pipeline.steer(queuedRun.runId, "not yet")).toBe(false);
        release.open();
        const fin = await h.pipeline.wait(rec.runId, LONG);
        expect(fin?.reply).toBe("go left|then right");
        expect(await h.pipeline.steer(rec.runId, "too late")).toBe(false);
        expect(await h.pipeline.steer("no-such-run", "x")).toBe(false);
        const q = await h.pipeline.wait(queuedRun.runId, LONG);
        expect(q?.reply).toBe("");
      });
    });

    // -------------------------------------------------------------------------------------------
    describe("background jobs", () => {
      it("runs a job once per id, also when submitted again while pending or after completion", async () => {
        const h = await setup();
        const calls = new Map<string, number>();
        const done = new Map<string, Latch>();
        const doneOf = (id: string) => {
          let l = done.get(id);
          if (!l) {
            l = latch();
            done.set(id, l);
          }
          return l;
        };
        await run(
          h.pipeline,
          handlers(
            async () => ok(""),
            async (job) => {
              calls.set(job.id, (calls.get(job.id) ?? 0) + 1);
              doneOf(job.id).open();
            },
          ),
        );
        const job: BackgroundJob = { kind: "archive", id: "job-1", data: { sessionKey: "s" } };
        await Promise.all([h.pipeline.submit(job, { delayMs: 30 }), h.pipeline.submit(job)]);
        await h.pipeline.submit(job);
        await doneOf("job-1").promise;
        // Sentinels submitted after completion flush anything a duplicate could have queued.
        await h.pipeline.submit({ kind: "archive", id: "sentinel-1", data: {} });
        await doneOf("sentinel-1").promise;
        await h.pipeline.submit(job);
        await h.pipeline.submit({ kind: "archive", id: "sentinel-2", data: {} });
        await doneOf("sentinel-2").promise;
        await ticks(5);
        expect(calls.get("job-1")).toBe(1);
      });

      it("fires a delayed job later, not synchronously", async () => {
        const h = await setup();
        const fired = latch();
        let firedAt = 0;
        await run(
          h.pipeline,
          handlers(
            async () => ok(""),
            async (job) => {
              expect(job).toEqual({ kind: "announce", id: "later-1", data: { n: 1 } });
              firedAt = performance.now();
              fired.open();
            },
          ),
        );
        const t0 = performance.now();
        await h.pipeline.submit({ kind: "announce", id: "later-1", data: { n: 1 } }, { delayMs: 50 });
        expect(firedAt).toBe(0);
        await fired.promise;
        expect(firedAt - t0).toBeGreaterThanOrEqual(30);
      });

      it("retries after RetryLaterError and never retries UnrecoverableJobError", async () => {
        const h = await setup();
        const calls = new Map<string, number>();
        const retried = latch();
        const sentinel = latch();
        await run(
          h.pipeline,
          handlers(
            async () => ok(""),
            async (job) => {
              const n = (calls.get(job.id) ?? 0) + 1;
              calls.set(job.id, n);
              if (job.id === "rl") {
                if (n === 1) throw new RetryLaterError("rate limited", 20);
                retried.open();
              }
              if (job.id === "bad") throw new UnrecoverableJobError("never works");
              if (job.id === "sentinel") sentinel.open();
            },
          ),
        );
        await h.pipeline.submit({ kind: "announce", id: "rl", data: {} });
        await h.pipeline.submit({ kind: "spawn", id: "bad", data: {} });
        await retried.promise;
        await h.pipeline.submit({ kind: "archive", id: "sentinel", data: {} }, { delayMs: 30 });
        await sentinel.promise;
        expect(calls.get("rl")).toBe(2);
        expect(calls.get("bad")).toBe(1);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe("start, stop and input", () => {
      it("validates input and names the field", async () => {
        const { pipeline: p } = await setup();
        await expect(p.submitTurn(msg("", "x"))).rejects.toThrow(InvalidParamsError);
        await expect(p.submitTurn(msg("", "x"))).rejects.toThrow(/turn\.sessionKey/);
        await expect(p.submit({ kind: "archive", id: "", data: {} })).rejects.toThrow(/job\.id/);
        await expect(p.steer("r", "")).rejects.toThrow(/text/);
      });

      it("start and stop are idempotent; work submitted after stop is refused", async () => {
        const { pipeline: p } = await setup();
        const { jobs, handlers: hs } = recorder();
        await run(p, hs);
        await p.start(hs);
        const r = await p.submitTurn(msg("s", "x"));
        await p.wait(r.runId, LONG);
        expect(jobs).toHaveLength(1);
        await Promise.all([p.stop(), p.stop()]);
        await p.stop();
        await expect(p.submitTurn(msg("s", "y"))).rejects.toThrow(SwitchboardError);
        await expect(p.submit({ kind: "archive", id: "a", data: {} })).rejects.toThrow(/stopped/);
      });

      it("accepts work before start (enqueue-only) and runs it once started", async () => {
        const { pipeline: p } = await setup();
        const r = await p.submitTurn(msg("s", "early"));
        expect(await p.queueInfo("s")).toEqual({ pending: 1 });
        expect((await p.wait(r.runId, 0))?.status).toBe("queued");
        const { jobs, handlers: hs } = recorder();
        await run(p, hs);
        expect((await p.wait(r.runId, LONG))?.status).toBe("ok");
        expect(jobs).toHaveLength(1);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe("restart", () => {
      it("re-runs queued and in-flight turns, keeps finished runs waitable, and fires delayed jobs", async () => {
        const h = await setup({ mode: "followup", concurrency: 2 });
        const inFlight = latch();
        let oldFired = 0;
        const p1 = await run(
          h.pipeline,
          handlers(
            async (job, jctx) => {
              if (job.messages[0]!.text === "done-before") return ok("early");
              inFlight.open();
              await untilAborted(jctx.signal);
              return { status: "aborted" };
            },
            async () => {
              oldFired++;
            },
          ),
        );
        const early = await p1.submitTurn(msg("s", "done-before"));
        expect((await p1.wait(early.runId, LONG))?.status).toBe("ok");
        const a1 = await p1.submitTurn(msg("s", "a1"));
        await inFlight.promise;
        const a2 = await p1.submitTurn(msg("s", "a2"));
        const a3 = await p1.submitTurn(msg("s", "a3"));
        const other = await p1.submitTurn(msg("t", "t1", { origin: "sessions_send" }));
        await p1.submit({ kind: "archive", id: "arch-1", data: { k: 1 } }, { delayMs: 300 });
        await p1.stop(50);
        expect(oldFired).toBe(0);

        const p2 = await h.restart();
        const runsSeen: Array<{ text: string; attempt: number }> = [];
        const fired = latch();
        await run(
          p2,
          handlers(
            async (job) => {
              for (const m of job.messages) runsSeen.push({ text: m.text, attempt: job.attempt });
              return ok(`again:${job.messages[0]!.text}`);
            },
            async (job) => {
              if (job.id === "arch-1") fired.open();
            },
          ),
        );
        const finals = await Promise.all([a1, a2, a3, other].map((r) => p2.wait(r.runId, LONG)));
        expect(finals.map((f) => f?.status)).toEqual(["ok", "ok", "ok", "ok"]);
        expect(finals[0]?.reply).toBe("again:a1");
        const sTexts = runsSeen.filter((r) => r.text.startsWith("a")).map((r) => r.text);
        expect(sTexts).toEqual(["a1", "a2", "a3"]);
        expect(runsSeen.find((r) => r.text === "a1")?.attempt).toBeGreaterThan(1);
        expect(runsSeen.find((r) => r.text === "a2")?.attempt).toBe(1);
        expect(runsSeen.some((r) => r.text === "done-before")).toBe(false);
        expect(await p2.wait(early.runId, 600_000)).toMatchObject({ status: "ok", reply: "early" });
        await fired.promise;
      });
    });

    // -------------------------------------------------------------------------------------------
    describe("follow-ups (transactional outbox)", () => {
      it("a run's follow-ups are committed with its final status: a stop right after the run ended still runs them after a restart, exactly once", async () => {
        const h = await setup({ mode: "followup", concurrency: 2 });
        let oldRelayed = 0;
        const p1 = await run(
          h.pipeline,
          handlers(
            async (job) => {
              if (job.messages[0]!.text !== "cause") return ok("plain");
              return {
                ...ok("caused"),
                followUps: [
                  { type: "job", job: { kind: "archive", id: `fu:${job.runId}`, data: { from: job.runId } } },
                  {
                    type: "turn",
                    turn: {
                      ...msg("t", "follow-up turn", { origin: "announce" }),
                      runId: `${job.runId}:next`,
                    },
                  },
                  // The same id twice is one follow-up.
                  { type: "job", job: { kind: "archive", id: `fu:${job.runId}`, data: { from: "dup" } } },
                ],
              };
            },
            async () => {
              oldRelayed++;
            },
          ),
        );
        // The process stops the moment the run is reported final: nothing after that point runs.
        let stopped: Promise<void> | undefined;
        const off = p1.onRunEvent((e) => {
          if (e.type === "run.finished" && e.run.reply === "caused") stopped ??= p1.stop(50);
        });
        const rec = await p1.submitTurn(msg("s", "cause"));
        expect(await p1.wait(rec.runId, LONG)).toMatchObject({ status: "ok", reply: "caused" });
        await until(() => stopped);
        await stopped;
        off();
        expect(oldRelayed).toBe(0);

        // Restart (twice): the committed follow-ups run once, and only once.
        const jobs: string[] = [];
        const turns: string[] = [];
        const sentinel = latch();
        const turnRan = latch();
        const restarted = async () =>
          run(
            await h.restart(),
            handlers(
              async (job) => {
                for (const m of job.messages) turns.push(m.runId);
                turnRan.open();
                return ok("follow-up done");
              },
              async (job) => {
                if (job.id.startsWith("sentinel")) sentinel.open();
                else jobs.push(`${job.id}|${String(job.data.from)}`);
              },
            ),
          );
        const p2 = await restarted();
        await turnRan.promise;
        expect(await p2.wait(`${rec.runId}:next`, LONG)).toMatchObject({
          status: "ok",
          reply: "follow-up done",
        });
        await until(() => jobs.length > 0 || undefined);
        await p2.stop(50);
        const p3 = await restarted();
        await p3.submit({ kind: "archive", id: "sentinel-fu", data: {} });
        await sentinel.promise;
        expect(jobs).toEqual([`fu:${rec.runId}|${rec.runId}`]);
        expect(turns).toEqual([`${rec.runId}:next`]);
        // The causing turn itself was not run again.
        expect(await p3.wait(rec.runId, 0)).toMatchObject({ status: "ok", reply: "caused" });
      });
    });
  });
}
