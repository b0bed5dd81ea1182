import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { scriptArgs } from "../../bench/proc.js";
import { silentLogger } from "../../src/log.js";
import { type BullmqPipeline, createBullmqPipeline } from "../../src/pipeline/bullmq/index.js";
import { hashTag } from "../../src/pipeline/bullmq/keys.js";
import type { TurnRequest } from "../../src/pipeline/types.js";
import type { RunRecord } from "../../src/store/types.js";
import { RedisTestRunStore, type WorkerCommand } from "../fixtures/bullmq-worker.js";
import { REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, newRedisClient, unlinkMatching } from "../redis.js";

/**
 * The bullmq driver across processes: two child-process workers (test/fixtures/bullmq-worker.ts)
 * share one Redis with this process, which only enqueues and waits (processJobs: false). Lock and
 * stall settings are 1 s, so a dead or stalled worker's turn moves on within a few seconds.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const FIXTURE = scriptArgs("test/fixtures/bullmq-worker.ts");
const LONG = 20_000;

interface Child {
  name: string;
  proc: ChildProcess;
  lines: string[];
  exited: Promise<void>;
}

/** Polls `fn` until it returns a value; the bound only matters when the feature is broken. */
async function until<T>(
  fn: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = LONG,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describeRedis("bullmq pipeline across processes", () => {
  const prefix = randomPrefix("bullmq-mp");
  const tag = hashTag(prefix);
  let redis: Redis;
  let runs: RedisTestRunStore;
  let producer: BullmqPipeline;
  const children: Child[] = [];

  function spawnWorker(name: string): Child {
    // node itself (the build, or `--import tsx`) rather than the tsx CLI: the CLI runs the script in
    // a second process and does not pass SIGKILL on, which would leave the "killed" worker alive.
    const proc = spawn(process.execPath, FIXTURE, {
      cwd: ROOT,
      env: {
        ...process.env,
        REDIS_URL,
        PREFIX: prefix,
        NAME: name,
        CONCURRENCY: "4",
        LOCK_MS: "1000",
        STALL_MS: "1000",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const child: Child = {
      name,
      proc,
      lines: [],
      exited: new Promise((r) => proc.once("exit", () => r())),
    };
    let buf = "";
    proc.stdout?.on("data", (d: Buffer) => {
      buf += d.toString();
      const parts = buf.split("\n");
      buf = parts.pop() ?? "";
      child.lines.push(...parts);
    });
    proc.stderr?.on("data", (d: Buffer) => child.lines.push(`stderr: ${d.toString()}`));
    children.push(child);
    return child;
  }

  const ready = (c: Child) => until(() => c.lines.includes("ready"), `worker ${c.name} ready`, 30_000);

  const turn = (sessionKey: string, cmd: WorkerCommand): TurnRequest => ({
    sessionKey,
    agentId: "main",
    text: JSON.stringify(cmd),
    deliver: false,
    origin: "sessions_send",
  });

  async function list(name: string): Promise<string[]> {
    return redis.lrange(`${tag}:test:${name}`, 0, -1);
  }

  beforeAll(async () => {
    redis = newRedisClient();
    runs = new RedisTestRunStore(redis, prefix);
    producer = createBullmqPipeline({
      connection: redis,
      createBlockingConnection: () => new Redis(REDIS_URL, { maxRetriesPerRequest: null }),
      prefix,
      runs,
      logger: silentLogger(),
      concurrency: 1,
      mode: "followup",
      lockDurationMs: 1000,
      stalledIntervalMs: 1000,
      processJobs: false,
    });
    await producer.start({ turn: async () => ({ status: "ok" }), background: async () => {} });
    const [a, b] = [spawnWorker("A"), spawnWorker("B")];
    await Promise.all([ready(a), ready(b)]);
  }, 60_000);

  afterAll(async () => {
    for (const c of children)
      if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill("SIGTERM");
    await Promise.all(children.map((c) => c.exited));
    await producer.stop(100);
    await unlinkMatching(redis, `${tag}:*`);
    await redis.quit();
  }, 30_000);

  it("bursts across two workers: every session's turns run in order, never overlapping, none lost", async () => {
    const sessions = 30;
    const perSession = 8;
    const submits: Array<Promise<RunRecord>> = [];
    for (let s = 0; s < sessions; s++) {
      // A burst: one session's messages back to back, all sessions at once.
      for (let i = 0; i < perSession; i++) {
        submits.push(producer.submitTurn(turn(`burst-${s}`, { seq: i, sleepMs: (s + i) % 4 })));
      }
    }
    const recs = await Promise.all(submits);
    const finals = await Promise.all(recs.map((r) => producer.wait(r.runId, LONG)));
    expect(finals.filter((f) => f?.status === "ok")).toHaveLength(sessions * perSession);

    const markers = (await list("markers")).filter((m) => m.split("|")[1]?.startsWith("burst-"));
    const bySession = new Map<string, string[]>();
    const workers = new Set<string>();
    for (const m of markers) {
      const [what, session, seq, worker] = m.split("|") as [string, string, string, string];
      workers.add(worker);
      bySession.set(session, [...(bySession.get(session) ?? []), `${what}:${seq}`]);
    }
    const expected = Array.from({ length: perSession }, (_, i) => [`start:${i}`, `end:${i}`]).flat();
    for (let s = 0; s < sessions; s++) expect(bySession.get(`burst-${s}`)).toEqual(expected);
    expect([...workers].sort()).toEqual(["A", "B"]);
  }, 60_000);

  it("SIGKILL mid-turn: another worker re-runs it (attempt 2) and the guarded side effect happens once", async () => {
    const rec = await producer.submitTurn(turn("kill-me", { seq: 0, effect: true, hangMs: 60_000 }));
    const marker = await until(
      async () => (await list("markers")).find((m) => m.startsWith("start|kill-me|")),
      "the turn to start",
    );
    const victim = children.find((c) => c.name === marker.split("|")[3])!;
    // The worker records its guarded effect right after the start marker: kill it once it did.
    await until(
      async () => (await list("effects")).find((e) => e.startsWith(rec.runId)),
      "the guarded effect",
    );
    expect((await list("effects")).filter((e) => e.startsWith(rec.runId))).toHaveLength(1);
    victim.proc.kill("SIGKILL");
    await victim.exited;
    const survivor = victim.name === "A" ? "B" : "A";
    const fin = await producer.wait(rec.runId, LONG);
    expect(fin).toMatchObject({ status: "ok", reply: `${survivor}:2` });
    expect(await list("effects")).toEqual([`${rec.runId}|${victim.name}`]);
    // The lane goes on after the recovered turn.
    const next = await producer.submitTurn(turn("kill-me", { seq: 1 }));
    expect((await producer.wait(next.runId, LONG))?.reply).toBe(`${survivor}:1`);
    // Two workers again for the next case.
    await ready(spawnWorker(victim.name === "A" ? "C" : "D"));
  }, 60_000);

  it("a zombie (event loop blocked past its lock) cannot commit: stillOwner is false and its final write is refused", async () => {
    const rec = await producer.submitTurn(turn("zombie", { seq: 0, blockMs: 4000 }));
    const owner = await until(
      async () => (await list("owner")).find((o) => o.startsWith(`${rec.runId}|`)),
      "the zombie to wake up",
    );
    const [, zombieName, attempt, stillOwner] = owner.split("|");
    expect(attempt).toBe("1");
    expect(stillOwner).toBe("false");
    const zombie = children.find((c) => c.name === zombieName)!;
    await until(
      () => zombie.lines.find((l) => l.includes("final write refused")),
      "the refusal to be logged",
    );
    // The run ends with the successor's attempt, never the zombie's.
    const fin = await producer.wait(rec.runId, LONG);
    expect(fin?.status).toBe("ok");
    expect(fin?.reply).toMatch(/:2$/);
    expect((await runs.get(rec.runId))?.reply).toBe(fin?.reply);
    const zombieTurns = (await list("markers")).filter((m) => m.startsWith("end|zombie|"));
    expect(zombieTurns.map((m) => m.split("|")[4])).toContain("2");
  }, 60_000);

  it("SIGKILL after the outbox commit, before the RunStore write: the survivor applies the committed outcome (no re-run) and its follow-ups run exactly once", async () => {
    const rec = await producer.submitTurn(
      turn("commit-kill", { seq: 0, followUp: true, dieAfterCommit: true }),
    );
    const commit = await until(
      async () => (await list("commits")).find((c) => c.startsWith(`committed|${rec.runId}|`)),
      "the commit",
    );
    const victimName = commit.split("|")[2]!;
    const victim = children.find((c) => c.name === victimName)!;
    victim.proc.kill("SIGKILL");
    await victim.exited;
    // The outcome the victim committed wins; the turn never runs a second time.
    const fin = await producer.wait(rec.runId, LONG);
    expect(fin).toMatchObject({ status: "ok", reply: `${victimName}:1` });
    await until(
      async () => (await list("markers")).find((m) => m.startsWith("end|commit-kill-next|")),
      "the follow-up turn",
    );
    expect((await producer.wait(`${rec.runId}:next`, LONG))?.status).toBe("ok");
    await until(async () => (await list("jobs")).find((j) => j.startsWith(`fu:${rec.runId}|`)), "the job");
    // A later job of the survivor proves nothing else was still coming.
    await producer.submit({ kind: "archive", id: `after:${rec.runId}`, data: {} });
    await until(async () => (await list("jobs")).find((j) => j.startsWith(`after:${rec.runId}|`)), "after");
    expect((await list("jobs")).filter((j) => j.startsWith(`fu:${rec.runId}|`))).toHaveLength(1);
    const starts = (await list("markers")).filter((m) => m.startsWith("start|commit-kill|"));
    expect(starts).toEqual([`start|commit-kill|0|${victimName}|1`]);
    expect((await list("markers")).filter((m) => m.startsWith("start|commit-kill-next|"))).toHaveLength(1);
    expect(await redis.llen(`${tag}:outbox`)).toBe(0);
  }, 60_000);
});
