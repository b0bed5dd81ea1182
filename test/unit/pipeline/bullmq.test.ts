import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { SwitchboardError } from "../../../src/errors.js";
import { silentLogger } from "../../../src/log.js";
import { Bus } from "../../../src/pipeline/bullmq/bus.js";
import { eventMessage, eventPrefix } from "../../../src/pipeline/bullmq/context.js";
import {
  type BullmqPipeline,
  type BullmqPipelineOptions,
  createBullmqPipeline,
} from "../../../src/pipeline/bullmq/index.js";
import { backgroundIdOf, backgroundJobId, hashTag, PipelineKeys } from "../../../src/pipeline/bullmq/keys.js";
import type { RunStore } from "../../../src/store/types.js";
import { type Latch, latch, msg, pipelineContract, recorder } from "../../contract/pipeline.js";
import { MemoryRunStore } from "../../helpers/memory-store.js";
import { hangingOnFinalWrite, REDIS_URL, randomPrefix, runsWith } from "../../helpers.js";
import { describeRedis, newRedisClient, ownRedis, unlinkMatching } from "../../redis.js";

const blocking = () => new Redis(REDIS_URL, { maxRetriesPerRequest: null });

// -------------------------------------------------------------------------------------------------
// keys and ids (pure)

describe("bullmq pipeline keys", () => {
  it("puts every key under one Cluster hash tag built from the prefix", () => {
    expect(hashTag("sb")).toBe("{sb}");
    expect(hashTag("{gw}:x")).toBe("{gw}:x");
    const k = new PipelineKeys("sb");
    expect(k.mailbox("agent:main:main")).toBe("{sb}:mb:agent:main:main");
    expect(k.active("agent:main:main")).toBe("{sb}:act:agent:main:main");
    expect(k.run("r1")).toBe("{sb}:run:r1");
    expect(k.lock("42")).toBe("{sb}:pipeline:42:lock");
    expect(k.pattern()).toBe("{sb}:*");
    expect(new PipelineKeys("a*b").pattern()).toBe("{a\\*b}:*");
  });

  it("encodes background job ids so BullMQ accepts them, and decodes them back", () => {
    for (const id of ["archive:agent:x:telegram:group:1", "123", "a%3Ab", "%:", "plain"]) {
      const jobId = backgroundJobId(id);
      expect(jobId).not.toContain(":");
      expect(`${Number.parseInt(jobId, 10)}`).not.toBe(jobId);
      expect(backgroundIdOf(jobId)).toBe(id);
    }
    expect(backgroundJobId("a:b")).toBe("bg-a%3Ab");
    expect(backgroundIdOf("7")).toBeNull();
  });
});

// -------------------------------------------------------------------------------------------------
// the shared contract, against a real Redis

describeRedis("bullmq pipeline", () => {
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const c of clients.splice(0)) await c.quit();
  });

  pipelineContract("bullmq", async ({ mode, concurrency }) => {
    const prefix = randomPrefix("bullmq");
    const connection = newRedisClient();
    clients.push(connection);
    const runs = new MemoryRunStore();
    const make = () =>
      createBullmqPipeline({
        connection,
        createBlockingConnection: blocking,
        prefix,
        runs,
        logger: silentLogger(),
        concurrency,
        mode,
        lockDurationMs: 2000,
        stalledIntervalMs: 1000,
      });
    const first = make();
    return {
      pipeline: first,
      restart: async () => make(),
      cleanup: async () => {
        await unlinkMatching(connection, first.keyPattern());
      },
    };
  });

  // -----------------------------------------------------------------------------------------------
  // bullmq-only behaviour

  describe("bullmq pipeline driver", () => {
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    /** `url`: another Redis than the shared one (a test that flushes its script cache). */
    function env(extra: Partial<BullmqPipelineOptions> = {}, url = REDIS_URL) {
      const prefix = randomPrefix("bullmq-x");
      const connection = url === REDIS_URL ? newRedisClient() : new Redis(url, { maxRetriesPerRequest: 3 });
      const runs = new MemoryRunStore();
      const made: BullmqPipeline[] = [];
      const make = (more: Partial<BullmqPipelineOptions> = {}): BullmqPipeline => {
        const p = createBullmqPipeline({
          connection,
          createBlockingConnection:
            url === REDIS_URL ? blocking : () => new Redis(url, { maxRetriesPerRequest: null }),
          prefix,
          runs,
          logger: silentLogger(),
          concurrency: 4,
          mode: "followup",
          lockDurationMs: 2000,
          stalledIntervalMs: 1000,
          ...extra,
          ...more,
        });
        made.push(p);
        return p;
      };
      const keys = new PipelineKeys(prefix);
      cleanups.push(async () => {
        for (const p of made) await p.stop(100);
        await unlinkMatching(connection, keys.pattern());
        await connection.quit();
      });
      return { prefix, connection, runs, make, keys };
    }

    it("is durable in Redis before submitTurn resolves: mailbox entry, request and queued record", async () => {
      const { make, connection, keys, runs } = env();
      const p = make();
      const rec = await p.submitTurn(msg("agent:main:telegram:group:1", "durable?"));
      expect(await connection.lrange(keys.mailbox("agent:main:telegram:group:1"), 0, -1)).toEqual([
        rec.runId,
      ]);
      const stored = await connection.hgetall(keys.run(rec.runId));
      expect(stored.st).toBe("q");
      expect(JSON.parse(stored.env ?? "{}")).toMatchObject({ req: { text: "durable?" } });
      expect((await runs.get(rec.runId))?.status).toBe("queued");
      expect(await connection.sismember(keys.dirty, "agent:main:telegram:group:1")).toBe(1);
    });

    it("a gateway-only instance enqueues and waits; a worker in another instance runs the turn", async () => {
      const { make } = env();
      const gateway = make({ processJobs: false });
      const worker = make();
      const { jobs, handlers } = recorder();
      await gateway.start(handlers); // no worker here: nothing runs in this instance
      await worker.start(handlers);
      const events: string[] = [];
      const finished = latch();
      gateway.onRunEvent((e) => {
        events.push(`${e.type}:${e.run.runId}`);
        if (e.type === "run.finished") finished.open();
      });
      const rec = await gateway.submitTurn(msg("s", "hello"));
      const fin = await gateway.wait(rec.runId, 10_000);
      expect(fin).toMatchObject({ status: "ok", reply: "r:hello" });
      expect(jobs).toHaveLength(1);
      // run.finished reached the gateway over the bus (it did not run the turn).
      await finished.promise;
      expect(events).toContain(`run.finished:${rec.runId}`);
    });

    it("a wait for a run this instance pushed while its bus listens reads no record; one that finished first, or whose bus went down in between, is read", async () => {
      const { make, runs } = env();
      let gets = 0;
      const counted: RunStore = new Proxy(runs, {
        get(target, prop) {
          const v: unknown = Reflect.get(target, prop);
          if (typeof v !== "function") return v;
          if (prop === "get")
            return (...args: Parameters<RunStore["get"]>) => {
              gets++;
              return runs.get(...args);
            };
          return v.bind(target);
        },
      });
      const subs: Redis[] = [];
      const gateway = make({
        processJobs: false,
        runs: counted,
        createBlockingConnection: () => {
          const c = blocking();
          subs.push(c);
          return c;
        },
      });
      const worker = make();
      const gates = new Map<string, Latch>();
      const started = new Map<string, Latch>();
      for (const t of ["a", "c"]) {
        gates.set(t, latch());
        started.set(t, latch());
      }
      await worker.start({
        turn: async (job) => {
          const text = job.messages[0]!.text;
          started.get(text)?.open();
          await gates.get(text)?.promise;
          return { status: "ok", reply: `r:${text}` };
        },
        background: async () => {},
      });
      const finishedB = latch();
      // a listener before start (as the app registers its own): start then hears run events
      gateway.onRunEvent((e) => {
        if (e.type === "run.finished" && e.run.sessionKey === "s-b") finishedB.open();
      });
      await gateway.start({ turn: async () => ({ status: "error" }), background: async () => {} });

      // a: pushed while listening, waited for while it runs: its finish arrives over the bus
      const a = await gateway.submitTurn(msg("s-a", "a"));
      const waitA = gateway.wait(a.runId, 10_000);
      await started.get("a")!.promise;
      gates.get("a")!.open();
      expect(await waitA).toMatchObject({ status: "ok", reply: "r:a" });
      expect(gets).toBe(0);

      // b: finished before anyone waited: the wait reads the final record at once
      const b = await gateway.submitTurn(msg("s-b", "b"));
      await finishedB.promise;
      expect(await gateway.wait(b.runId, 60_000)).toMatchObject({ status: "ok", reply: "r:b" });
      expect(gets).toBe(1);

      // c: the bus went down after the push and the finish was published meanwhile (missed):
      // the wait must read, or it would sit until its deadline
      const c = await gateway.submitTurn(msg("s-c", "c"));
      await started.get("c")!.promise;
      expect(subs).toHaveLength(1); // the gateway's only blocking connection: its bus
      const bus = subs[0]!;
      const ended = new Promise((r) => bus.once("end", r));
      bus.disconnect(false);
      await ended;
      gates.get("c")!.open();
      for (let i = 0; i < 500 && (await runs.get(c.runId))?.status !== "ok"; i++)
        await new Promise((r) => setTimeout(r, 10));
      expect(await gateway.wait(c.runId, 60_000)).toMatchObject({ status: "ok", reply: "r:c" });
      expect(gets).toBe(2);
    }, 20_000);

    it("the bus listens in a new generation only once a lost subscription is confirmed again", async () => {
      const { keys, connection } = env();
      const subs: Redis[] = [];
      const got: string[] = [];
      let reconnects = 0;
      const bus = new Bus(
        () => {
          const c = blocking();
          subs.push(c);
          return c;
        },
        { control: keys.bus, runs: keys.runEvents },
        silentLogger(),
        (m) => {
          if (m.t === "steer") got.push(m.text);
          if (m.t === "ev") got.push(`ev:${m.runs[0]?.runId}`);
        },
        () => reconnects++,
      );
      cleanups.push(() => bus.close());
      expect(bus.listening()).toBeNull(); // not subscribed yet
      await bus.ensure();
      expect(bus.listening()).toBeNull(); // cancel and steer only: run events may be missed
      await bus.ensureRuns();
      const first = bus.listening();
      expect(first).not.toBeNull();
      const sub = subs[0]!;
      const closed = new Promise((r) => sub.once("close", r));
      sub.disconnect(true); // dropped, then ioredis reconnects and re-subscribes
      await closed;
      expect(bus.listening()).toBeNull();
      for (let i = 0; i < 300 && bus.listening() === null; i++) await new Promise((r) => setTimeout(r, 10));
      const second = bus.listening();
      expect(second).not.toBeNull();
      expect(second).not.toBe(first);
      expect(reconnects).toBe(1);
      // and it hears what is published now, on both channels
      const steer = JSON.stringify({ t: "steer", from: "other", runId: "r", text: "heard" });
      const rec = { runId: "r2", sessionKey: "s", agentId: "main", status: "ok" as const, createdAt: 1 };
      for (let i = 0; i < 300 && got.length < 2; i++) {
        if (i % 50 === 0) {
          got.length = 0;
          await connection.publish(keys.bus, steer);
          await connection.publish(keys.runEvents, eventMessage("other", "run.finished", [rec]));
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(got).toEqual(["heard", "ev:r2"]);
      await bus.close();
      expect(bus.listening()).toBeNull();
    });

    it("the bus drops this process's own run events unparsed and hands on everyone else's", async () => {
      const { keys, connection } = env();
      const got: string[] = [];
      const bus = new Bus(
        blocking,
        { control: keys.bus, runs: keys.runEvents },
        silentLogger(),
        (m) => got.push(`${m.t}:${m.from}`),
        () => undefined,
        eventPrefix("me"),
      );
      cleanups.push(() => bus.close());
      await bus.ensureRuns();
      const rec = { runId: "r1", sessionKey: "s", agentId: "main", status: "ok" as const, createdAt: 1 };
      await connection.publish(keys.runEvents, eventMessage("me", "run.finished", [rec]));
      await connection.publish(keys.runEvents, `${eventPrefix("me")}not json at all`);
      await connection.publish(keys.bus, JSON.stringify({ t: "steer", from: "me", runId: "r1", text: "x" }));
      await connection.publish(keys.runEvents, eventMessage("other", "run.finished", [rec]));
      await vi.waitFor(() => expect(got).toContain("ev:other"));
      // its own steer is not a run event: parsed and handed on (the pipeline ignores it by `from`)
      expect(got).toEqual(["steer:me", "ev:other"]);
    });

    it("run events reach only the instances that want them: a finished turn wakes no worker that has no waiter", async () => {
      const { make, keys, connection } = env();
      const listeners = async (channel: string) =>
        ((await connection.call("PUBSUB", "NUMSUB", channel)) as [string, number])[1];
      const gateway = make({ processJobs: false });
      const worker = make();
      const waiter = make({ processJobs: false });
      const gate = latch();
      const started = latch();
      gateway.onRunEvent(() => undefined); // as the app's gateway does, for its clients
      await gateway.start(recorder().handlers);
      await worker.start({
        turn: async () => {
          started.open();
          await gate.promise;
          return { status: "ok", reply: "done" };
        },
        background: async () => {},
      });
      await waiter.start(recorder().handlers);
      expect(await listeners(keys.bus)).toBe(3); // everyone hears cancel and steer
      expect(await listeners(keys.runEvents)).toBe(1); // run events: the gateway alone

      const rec = await gateway.submitTurn(msg("s", "hello"));
      await started.promise;
      // a wait subscribes its instance first; the finish published by the worker then settles it
      // (its deadline is far past the test's timeout: only the event can end it in time)
      const waited = waiter.wait(rec.runId, 120_000);
      await vi.waitFor(async () => expect(await listeners(keys.runEvents)).toBe(2));
      gate.open();
      expect(await waited).toMatchObject({ status: "ok", reply: "done" });
    }, 15_000);

    it("cancels and steers a run that executes in another instance", async () => {
      const { make } = env();
      const gateway = make({ processJobs: false });
      const worker = make();
      let started!: () => void;
      const startedP = new Promise<void>((r) => {
        started = r;
      });
      const steered: string[][] = [];
      await worker.start({
        turn: async (job, ctx) => {
          started();
          await new Promise<void>((r) => {
            if (ctx.signal.aborted) r();
            ctx.signal.addEventListener("abort", () => r(), { once: true });
          });
          steered.push(ctx.takeSteering());
          return { status: "ok", reply: job.messages[0]!.text };
        },
        background: async () => {},
      });
      const rec = await gateway.submitTurn(msg("s", "long"));
      await startedP;
      expect(await gateway.steer(rec.runId, "left")).toBe(true);
      // The steer travels over pub/sub; cancel after it (same channel, same order).
      expect(await gateway.cancel(rec.runId, "aborted")).toBe(true);
      const fin = await gateway.wait(rec.runId, 10_000);
      expect(fin?.status).toBe("aborted");
      expect(steered).toEqual([["left"]]);
      expect(await gateway.cancel(rec.runId, "aborted")).toBe(false);
      expect(await gateway.steer(rec.runId, "late")).toBe(false);
    });

    it("re-drives a mailbox whose drain job was never added (producer died after the push)", async () => {
      const { make, connection, keys, runs } = env({ sweepIntervalMs: 200 });
      const p = make();
      // What a producer leaves when it dies between the mailbox push and queue.add:
      await runs.put({ runId: "orphan-1", sessionKey: "s", agentId: "main", status: "queued", createdAt: 1 });
      await connection.hset(keys.run("orphan-1"), {
        s: "s",
        st: "q",
        env: JSON.stringify({ req: msg("s", "orphaned"), createdAt: 1 }),
      });
      await connection.rpush(keys.mailbox("s"), "orphan-1");
      await connection.sadd(keys.dirty, "s");
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      expect(await p.wait("orphan-1", 10_000)).toMatchObject({ status: "ok", reply: "r:orphaned" });
      expect(jobs.map((j) => j.runId)).toEqual(["orphan-1"]);
    });

    it("resumes a turn left in flight by a dead worker with attempt + 1, or only acks it when already final", async () => {
      const { make, connection, keys, runs } = env();
      const p = make();
      for (const [id, status] of [
        ["r-dead", "running"],
        ["r-final", "ok"],
      ] as const) {
        const s = `sess-${id}`;
        await runs.put({ runId: id, sessionKey: s, agentId: "main", status, createdAt: 1, reply: "kept" });
        await connection.hset(keys.run(id), {
          s,
          st: "a",
          env: JSON.stringify({ req: msg(s, id), createdAt: 1 }),
        });
        await connection.hset(keys.active(s), { ids: JSON.stringify([id]), attempt: 1, job: "gone-job" });
        await connection.sadd(keys.dirty, s);
      }
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      // A later message in each session proves the lane moved past the in-flight turn.
      const a = await p.submitTurn(msg("sess-r-dead", "after"));
      const b = await p.submitTurn(msg("sess-r-final", "after"));
      await Promise.all([p.wait(a.runId, 10_000), p.wait(b.runId, 10_000)]);
      expect(jobs.filter((j) => j.sessionKey === "sess-r-dead").map((j) => [j.runId, j.attempt])).toEqual([
        ["r-dead", 2],
        [a.runId, 1],
      ]);
      expect(jobs.filter((j) => j.sessionKey === "sess-r-final").map((j) => j.runId)).toEqual([b.runId]);
      expect(await runs.get("r-final")).toMatchObject({ status: "ok", reply: "kept" });
      expect(await connection.exists(keys.active("sess-r-final"))).toBe(0);
    });

    it("a cancel flag left on a turn whose worker died ends it with that status, without running it", async () => {
      const { make, connection, keys, runs } = env();
      const p = make();
      await runs.put({ runId: "doomed", sessionKey: "s", agentId: "main", status: "running", createdAt: 1 });
      await connection.hset(keys.run("doomed"), {
        s: "s",
        st: "a",
        env: JSON.stringify({ req: msg("s", "x"), createdAt: 1 }),
      });
      await connection.hset(keys.active("s"), { ids: JSON.stringify(["doomed"]), attempt: 1, job: "gone" });
      expect(await p.cancel("doomed", "timeout")).toBe(true); // nobody runs it: only the flag remains
      await connection.sadd(keys.dirty, "s");
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      const next = await p.submitTurn(msg("s", "next"));
      await p.wait(next.runId, 10_000);
      expect(await p.wait("doomed", 10_000)).toMatchObject({ status: "timeout" });
      expect(jobs.map((j) => j.runId)).toEqual([next.runId]);
    });

    // direct turns (src/pipeline/bullmq/direct.ts)

    /** Every direct lock key left in Redis. */
    const directLocks = (connection: Redis, keys: PipelineKeys) =>
      connection.keys(`${keys.jobPrefix.replace(/[{}]/g, "\\$&")}direct-*:lock`);

    it("runs a turn it accepts for an idle session itself, under its own lock, which goes with the ack; a message left after it goes to a drain job", async () => {
      const { make, connection, keys } = env();
      const p = make();
      const gate = latch();
      const seen: Array<[string, number]> = [];
      let locksDuring: string[] = [];
      await p.start({
        turn: async (job) => {
          seen.push([job.messages[0]!.text, job.attempt]);
          if (job.messages[0]!.text === "first") {
            locksDuring = await directLocks(connection, keys);
            await gate.promise;
          }
          return { status: "ok", reply: `r:${job.messages[0]!.text}` };
        },
        background: async () => {},
      });
      const first = await p.submitTurn(msg("s", "first"));
      // A second message while the turn runs waits in the mailbox; after the ack a drain job takes it.
      const second = await p.submitTurn(msg("s", "second"));
      await vi.waitFor(() => expect(seen).toHaveLength(1));
      // The turn is held by this process's direct id, not by a BullMQ job.
      expect(await connection.hget(keys.active("s"), "job")).toMatch(/^direct-/);
      gate.open();
      expect(await p.wait(first.runId, 10_000)).toMatchObject({ status: "ok", reply: "r:first" });
      expect(await p.wait(second.runId, 10_000)).toMatchObject({ status: "ok", reply: "r:second" });
      expect(seen).toEqual([
        ["first", 1],
        ["second", 1],
      ]);
      expect(p.stats()).toMatchObject({ turns: 2, direct: 1 });
      expect(locksDuring).toHaveLength(1);
      expect(await directLocks(connection, keys)).toEqual([]);
    });

    it("a submit and its direct take that both meet a flushed script cache still run the turn, without waiting for the sweep", async () => {
      // Its own Redis: a flush of the shared one's script cache would reach every test running
      // beside this one (their next EVALSHA answers NOSCRIPT and costs an EVAL more).
      const own = await ownRedis();
      cleanups.push(own.cleanup); // runs last: the pipeline stops first
      const { make, connection } = env({ sweepIntervalMs: 600_000 }, own.url);
      const p = make();
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      const warm = await p.submitTurn(msg("s", "warm"));
      await p.wait(warm.runId, 10_000);
      await connection.script("FLUSH"); // what a Redis restart does: every EVALSHA answers NOSCRIPT
      const rec = await p.submitTurn(msg("s", "after the flush"));
      expect(await p.wait(rec.runId, 10_000)).toMatchObject({ status: "ok", reply: "r:after the flush" });
      expect(jobs.map((j) => j.messages[0]!.text)).toEqual(["warm", "after the flush"]);
    });

    it("with directTurns false every turn goes through a drain job", async () => {
      const { make } = env();
      const p = make({ directTurns: false });
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      const rec = await p.submitTurn(msg("s", "queued"));
      expect(await p.wait(rec.runId, 10_000)).toMatchObject({ status: "ok" });
      expect(jobs).toHaveLength(1);
      expect(p.stats()).toMatchObject({ turns: 1, direct: 0 });
    });

    it("a direct turn whose process stops mid-turn is handed back and resumed by another instance with attempt 2", async () => {
      const { make, connection, keys } = env();
      const p1 = make();
      const started = latch();
      await p1.start({
        turn: async (_job, ctx) => {
          started.open();
          await new Promise<void>((r) => ctx.signal.addEventListener("abort", () => r(), { once: true }));
          return { status: "ok", reply: "never committed" };
        },
        background: async () => {},
      });
      const rec = await p1.submitTurn(msg("s", "handed back"));
      await started.promise;
      await p1.stop(0);
      expect(p1.stats()).toMatchObject({ direct: 1, handedBack: 1 });
      // Handed over at once: no lock keeps the next drain job away.
      expect(await directLocks(connection, keys)).toEqual([]);
      const p2 = make({ directTurns: false });
      const { jobs, handlers } = recorder();
      await p2.start(handlers);
      expect(await p2.wait(rec.runId, 10_000)).toMatchObject({ status: "ok", reply: "r:handed back" });
      expect(jobs.map((j) => j.attempt)).toEqual([2]);
    });

    it("a direct turn whose lock is lost is aborted, its write refused, and the turn resumed after the sweep", async () => {
      const { make, connection, keys } = env({ lockDurationMs: 600 });
      const p = make();
      const attempts: number[] = [];
      let firstOwner: boolean | null = null;
      await p.start({
        turn: async (job, ctx) => {
          attempts.push(job.attempt);
          if (job.attempt === 1) {
            const [lock] = await directLocks(connection, keys);
            if (lock) await connection.del(lock); // what an expiry does to a stalled process
            await new Promise<void>((r) => ctx.signal.addEventListener("abort", () => r(), { once: true }));
            firstOwner = await ctx.stillOwner();
          }
          return { status: "ok", reply: `attempt ${job.attempt}` };
        },
        background: async () => {},
      });
      const rec = await p.submitTurn(msg("s", "fenced"));
      expect(await p.wait(rec.runId, 15_000)).toMatchObject({ status: "ok", reply: "attempt 2" });
      expect(attempts).toEqual([1, 2]);
      // The renewal finds the lock gone: the first attempt is aborted, no longer owner, and refused.
      await vi.waitFor(() => expect(p.stats()).toMatchObject({ direct: 1, fenced: 1, resumed: 1 }), 5_000);
      expect(firstOwner).toBe(false);
      expect(await p.wait(rec.runId, 0)).toMatchObject({ reply: "attempt 2" });
    });

    it("keeps one drain job per session however many messages wait", async () => {
      const { make, connection, keys } = env();
      const p = make();
      const recs = await Promise.all(
        Array.from({ length: 20 }, (_, i) => p.submitTurn(msg(`s${i % 2}`, `${i}`))),
      );
      const waiting = await connection.lrange(`${keys.tag}:pipeline:wait`, 0, -1);
      expect(waiting).toHaveLength(2);
      expect(await p.queueInfo("s0")).toEqual({ pending: 10 });
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      const last = await p.submitTurn(msg("s1", "last"));
      // Each session's turns finish in order, but s0's may still be running when s1's last is done.
      for (const rec of [...recs, last]) await p.wait(rec.runId, 10_000);
      expect(jobs).toHaveLength(21);
    });

    it("background job ids may contain ':' (encoded for BullMQ) and stay idempotent", async () => {
      const { make } = env();
      const p = make();
      const seen: string[] = [];
      let done!: () => void;
      const sentinel = new Promise<void>((r) => {
        done = r;
      });
      await p.start({
        turn: async () => ({ status: "ok" }),
        background: async (job) => {
          seen.push(job.id);
          if (job.id === "sentinel") done();
        },
      });
      const id = "archive:agent:main:telegram:group:1";
      await p.submit({ kind: "archive", id, data: { sessionKey: "agent:main:telegram:group:1" } });
      await p.submit({ kind: "archive", id, data: {} });
      await p.submit({ kind: "archive", id: "sentinel", data: {} }, { delayMs: 50 });
      await sentinel;
      expect(seen).toEqual([id, "sentinel"]);
    });

    it("ends a turn as error after maxTurnAttempts instead of re-running it forever", async () => {
      const { make, connection, keys, runs } = env({ maxTurnAttempts: 2 });
      const p = make();
      await runs.put({ runId: "poison", sessionKey: "s", agentId: "main", status: "running", createdAt: 1 });
      await connection.hset(keys.run("poison"), {
        s: "s",
        st: "a",
        env: JSON.stringify({ req: msg("s", "x"), createdAt: 1 }),
      });
      await connection.hset(keys.active("s"), { ids: JSON.stringify(["poison"]), attempt: 2, job: "gone" });
      await connection.sadd(keys.dirty, "s");
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      const next = await p.submitTurn(msg("s", "next"));
      await p.wait(next.runId, 10_000);
      expect((await runs.get("poison"))?.status).toBe("error");
      expect((await runs.get("poison"))?.error).toMatch(/abandoned after 2 attempts/);
      expect(jobs.map((j) => j.runId)).toEqual([next.runId]);
    });

    it("a retry with the runId of a submit that failed before its mailbox push is queued and run", async () => {
      const { make, runs } = env();
      const p = make();
      // What a submit leaves when Redis fails between the record write and the mailbox push:
      await runs.put({ runId: "retry-1", sessionKey: "s", agentId: "main", status: "queued", createdAt: 1 });
      const { jobs, handlers } = recorder();
      await p.start(handlers);
      const rec = await p.submitTurn(msg("s", "again", { runId: "retry-1" }));
      expect(rec.status).toBe("queued");
      expect(await p.wait("retry-1", 10_000)).toMatchObject({ status: "ok", reply: "r:again" });
      // A true duplicate (pipeline state exists) is still ignored.
      await p.submitTurn(msg("s", "again", { runId: "retry-1" }));
      const probe = await p.submitTurn(msg("s", "probe"));
      await p.wait(probe.runId, 10_000);
      expect(jobs.map((j) => j.messages[0]!.text)).toEqual(["again", "probe"]);
    });

    it("validates its options, naming the field", () => {
      const { make } = env();
      expect(() => make({ concurrency: 0 })).toThrow(/queue\.concurrency/);
      const prefixed = new Redis(REDIS_URL, { keyPrefix: "x:", lazyConnect: true });
      expect(() => make({ connection: prefixed })).toThrow(/keyPrefix/);
      prefixed.disconnect();
    });

    it("a worker that dies between the outbox commit and the RunStore write: the next worker applies the committed outcome (no re-run) and relays the follow-ups once", async () => {
      const { make, runs, connection, keys } = env();
      // The first worker's final RunStore write never returns (it "dies" there).
      const { runs: dying, reachedFinalWrite } = hangingOnFinalWrite(runs);
      // One slot: once its turn hangs in the final write, this worker runs nothing else. With more,
      // its sweep job could relay the committed follow-ups to itself before the stop (a worker that
      // is only half dead), and the next worker would never see them.
      const p1 = make({ runs: dying, abortSettleMs: 0, concurrency: 1 });
      await p1.start({
        turn: async (job) => ({
          status: "ok",
          reply: `caused:${job.attempt}`,
          followUps: [
            { type: "job", job: { kind: "archive", id: `fu:${job.runId}`, data: {} } },
            {
              type: "turn",
              turn: { ...msg("t", "next", { origin: "announce" }), runId: `${job.runId}:next` },
            },
          ],
        }),
        background: async () => {},
      });
      const rec = await p1.submitTurn(msg("s", "cause"));
      await reachedFinalWrite;
      // Outcome and follow-ups were written by one script, before the RunStore.
      expect(await connection.llen(keys.outbox)).toBe(2);
      expect(JSON.parse((await connection.hget(keys.active("s"), "final")) ?? "{}")).toMatchObject({
        result: { status: "ok", reply: "caused:1" },
      });
      expect((await runs.get(rec.runId))?.status).toBe("running");
      await p1.stop(0); // its lock is no longer renewed: the turn moves on after the lock expires

      const turns: string[] = [];
      const jobs: string[] = [];
      let nextRan!: () => void;
      const nextP = new Promise<void>((r) => {
        nextRan = r;
      });
      let sentinel!: () => void;
      const sentinelP = new Promise<void>((r) => {
        sentinel = r;
      });
      const p2 = make();
      await p2.start({
        turn: async (job) => {
          turns.push(job.messages[0]!.text);
          if (job.runId === `${rec.runId}:next`) nextRan();
          return { status: "ok", reply: "ran" };
        },
        background: async (job) => {
          if (job.id === "sentinel") sentinel();
          else jobs.push(job.id);
        },
      });
      expect(await p2.wait(rec.runId, 15_000)).toMatchObject({ status: "ok", reply: "caused:1" });
      await nextP;
      await p2.submit({ kind: "archive", id: "sentinel", data: {} }, { delayMs: 50 });
      await sentinelP;
      expect(turns).toEqual(["next"]);
      expect(jobs).toEqual([`fu:${rec.runId}`]);
      expect(await connection.llen(keys.outbox)).toBe(0);
    }, 30_000);

    it("a RunStore write that fails after the outbox commit: the retried drain applies the committed outcome, never a re-run", async () => {
      const { make, runs, connection, keys } = env();
      let failures = 1;
      const flaky = runsWith(runs, {
        patch: async (id, patch) => {
          if (patch.status === "ok" && failures-- > 0)
            throw new SwitchboardError("UNAVAILABLE", "store blip");
          return runs.patch(id, patch);
        },
      });
      const attempts: number[] = [];
      const jobs: string[] = [];
      let jobRan!: () => void;
      const jobP = new Promise<void>((r) => {
        jobRan = r;
      });
      const p = make({ runs: flaky });
      await p.start({
        turn: async (job) => {
          attempts.push(job.attempt);
          return {
            status: "ok",
            reply: `committed:${job.attempt}`,
            followUps: [{ type: "job", job: { kind: "archive", id: `fu:${job.runId}`, data: {} } }],
          };
        },
        background: async (job) => {
          jobs.push(job.id);
          jobRan();
        },
      });
      const rec = await p.submitTurn(msg("s", "x"));
      await jobP;
      expect(await p.wait(rec.runId, 15_000)).toMatchObject({ status: "ok", reply: "committed:1" });
      expect(attempts).toEqual([1]);
      expect(jobs).toEqual([`fu:${rec.runId}`]);
      expect(await connection.llen(keys.outbox)).toBe(0);
    }, 30_000);
  });
});
