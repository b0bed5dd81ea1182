/**
 * Pipeline overhead of the bullmq driver: zero-latency turn handler, 1,000 sessions, N turns, Redis
 * at REDIS_URL (default redis://127.0.0.1:6379, sharing this machine's cores). Measures turns/s
 * from the first submit to the last `run.finished`, submit latency (until the run is durable in
 * Redis) and submit → finished latency. Budget (DESIGN.md): ≥ 1,000 turns/s with one worker.
 *
 * Rows: one worker in this process (the producers run here too), then two worker processes with
 * this process only enqueueing (`processJobs: false`; finished events reach it over pub/sub), then
 * submissions paced at 500/s. Unpaced rows submit as fast as runs are accepted, so their
 * submit → finished latency is mostly time spent waiting behind the backlog; the paced row shows
 * the latency the pipeline itself adds. Run
 * records live in an in-memory RunStore in every process (each worker recreates the records it
 * runs), so the figures are the pipeline's own cost, without a RunStore's.
 *
 *   npx tsx bench/pipeline-bullmq.ts [turns] [sessions]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Redis } from "ioredis";
import { silentLogger } from "../src/log.js";
import { type BullmqPipeline, createBullmqPipeline } from "../src/pipeline/bullmq/index.js";
import { MemoryRunStore } from "../test/helpers/memory-store.js";

const BUDGET = 1000;
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const LOCK_MS = 5000;

export interface PipelineBullmqResult {
  bench: "pipeline-bullmq";
  workers: string;
  mode: "collect" | "followup";
  turns: number;
  handlerCalls: number | null;
  sessions: number;
  concurrency: number;
  producers: number;
  seconds: number;
  turnsPerSec: number;
  submitP50Ms: number;
  submitP99Ms: number;
  finishP50Ms: number;
  finishP99Ms: number;
  /** null for the paced row (its rate is set by the bench, not measured against the budget). */
  budgetTurnsPerSec: number | null;
  pass: boolean;
}

interface Once {
  turns: number;
  sessions: number;
  mode: "collect" | "followup";
  concurrency: number;
  producers: number;
  /** 0 = one worker in this process; n = n worker processes. */
  workerProcesses: number;
  /** Paced submissions (turns/s) instead of as fast as accepted: latency without a backlog. */
  ratePerSec?: number;
}

function makePipeline(
  connection: Redis,
  prefix: string,
  opts: { mode: "collect" | "followup"; concurrency: number; processJobs: boolean },
): BullmqPipeline {
  return createBullmqPipeline({
    connection,
    createBlockingConnection: () => new Redis(REDIS_URL, { maxRetriesPerRequest: null }),
    prefix,
    runs: new MemoryRunStore(),
    logger: silentLogger(),
    lockDurationMs: LOCK_MS,
    stalledIntervalMs: LOCK_MS,
    ...opts,
  });
}

async function once(opts: Once): Promise<PipelineBullmqResult> {
  const prefix = `sbbench:${Math.random().toString(36).slice(2, 10)}`;
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const children: ChildProcess[] = [];
  let handlerCalls: number | null = null;
  const pipeline = makePipeline(connection, prefix, {
    mode: opts.mode,
    concurrency: opts.concurrency,
    processJobs: opts.workerProcesses === 0,
  });
  try {
    if (opts.workerProcesses === 0) handlerCalls = 0;
    await pipeline.start({
      turn: async () => {
        if (handlerCalls !== null) handlerCalls++;
        return { status: "ok", reply: "" };
      },
      background: async () => {},
    });
    for (let i = 0; i < opts.workerProcesses; i++) children.push(await spawnWorker(prefix, opts));

    const submittedAt = new Map<string, number>();
    const finishLatencies: number[] = [];
    let finished = 0;
    let resolveAll!: () => void;
    const allDone = new Promise<void>((r) => {
      resolveAll = r;
    });
    pipeline.onRunEvent((e) => {
      if (e.type !== "run.finished") return;
      const t = submittedAt.get(e.run.runId);
      if (t === undefined) return;
      submittedAt.delete(e.run.runId);
      finishLatencies.push(performance.now() - t);
      if (++finished === opts.turns) resolveAll();
    });

    const submitLatencies: number[] = [];
    let next = 0;
    const t0 = performance.now();
    const producer = async () => {
      while (next < opts.turns) {
        const i = next++;
        if (opts.ratePerSec) {
          const due = t0 + (i * 1000) / opts.ratePerSec - performance.now();
          if (due > 0) await new Promise((r) => setTimeout(r, due));
        }
        const runId = `bench-${i}`;
        const s0 = performance.now();
        submittedAt.set(runId, s0);
        await pipeline.submitTurn({
          sessionKey: `agent:main:bench:${i % opts.sessions}`,
          agentId: "main",
          text: `message ${i}`,
          deliver: true,
          origin: "inbound",
          runId,
        });
        submitLatencies.push(performance.now() - s0);
      }
    };
    await Promise.all(Array.from({ length: opts.producers }, producer));
    await allDone;
    const seconds = (performance.now() - t0) / 1000;
    const turnsPerSec = Math.round(opts.turns / seconds);
    return {
      bench: "pipeline-bullmq",
      workers:
        (opts.workerProcesses === 0 ? "1 in-process" : `${opts.workerProcesses} processes`) +
        (opts.ratePerSec ? `, paced ${opts.ratePerSec}/s` : ""),
      mode: opts.mode,
      turns: opts.turns,
      handlerCalls,
      sessions: opts.sessions,
      concurrency: opts.concurrency,
      producers: opts.producers,
      seconds: Number(seconds.toFixed(3)),
      turnsPerSec,
      submitP50Ms: pct(submitLatencies, 0.5),
      submitP99Ms: pct(submitLatencies, 0.99),
      finishP50Ms: pct(finishLatencies, 0.5),
      finishP99Ms: pct(finishLatencies, 0.99),
      budgetTurnsPerSec: opts.ratePerSec ? null : BUDGET,
      pass: opts.ratePerSec ? true : turnsPerSec >= BUDGET,
    };
  } finally {
    for (const c of children) c.kill("SIGTERM");
    await Promise.all(
      children.map((c) => (c.exitCode === null ? new Promise((r) => c.once("exit", r)) : null)),
    );
    await pipeline.stop(1000);
    await unlinkAll(connection, `{${prefix}}:*`);
    await connection.quit();
  }
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Number((sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0).toFixed(3));
}

async function unlinkAll(redis: Redis, pattern: string): Promise<void> {
  let cursor = "0";
  do {
    const [nextCursor, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    if (keys.length > 0) await redis.unlink(...keys);
    cursor = nextCursor;
  } while (cursor !== "0");
}

/** A worker process: this same file with `--worker`; resolves once it reports "ready". */
function spawnWorker(prefix: string, opts: Once): Promise<ChildProcess> {
  const self = fileURLToPath(import.meta.url);
  const args = [...process.execArgv, self, "--worker", prefix, opts.mode, String(opts.concurrency)];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`bench worker exited early (${code})`)));
    child.stdout?.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) resolve(child);
    });
  });
}

async function workerMain(prefix: string, mode: "collect" | "followup", concurrency: number): Promise<void> {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const pipeline = makePipeline(connection, prefix, { mode, concurrency, processJobs: true });
  await pipeline.start({ turn: async () => ({ status: "ok", reply: "" }), background: async () => {} });
  process.stdout.write("ready\n");
  process.on("SIGTERM", () => {
    void pipeline
      .stop(1000)
      .then(() => connection.quit())
      .finally(() => process.exit(0));
  });
}

/** Runs the bench, prints a table and one JSON line (`{"bench":"pipeline-bullmq", …}`), returns the rows. */
export async function run(opts: { turns?: number; sessions?: number } = {}): Promise<PipelineBullmqResult[]> {
  const turns = opts.turns ?? 20_000;
  const sessions = opts.sessions ?? 1000;
  const base = { turns, sessions, producers: 100, workerProcesses: 0 };
  // Warm-up (JIT, Redis script cache) on a small run, not reported.
  await once({ ...base, turns: 2000, mode: "followup", concurrency: 8 });
  const results: PipelineBullmqResult[] = [];
  // First row = the shipped defaults (queue.concurrency 8); then more slots, collect mode, 2 processes.
  results.push(await once({ ...base, mode: "followup", concurrency: 8 }));
  results.push(await once({ ...base, mode: "followup", concurrency: 64 }));
  results.push(await once({ ...base, mode: "collect", concurrency: 8 }));
  results.push(await once({ ...base, mode: "followup", concurrency: 32, workerProcesses: 2 }));
  // Latency without a backlog: submissions paced well below capacity.
  results.push(
    await once({ ...base, turns: Math.min(turns, 5000), mode: "followup", concurrency: 8, ratePerSec: 500 }),
  );
  printTable(results);
  console.log(JSON.stringify({ ...results[0], variants: results.slice(1) }));
  return results;
}

function printTable(results: PipelineBullmqResult[]): void {
  console.table(
    results.map((r) => ({
      workers: r.workers,
      mode: r.mode,
      concurrency: r.concurrency,
      turns: r.turns,
      "handler calls": r.handlerCalls ?? "-",
      "turns/s": r.turnsPerSec,
      "submit p50/p99 ms": `${r.submitP50Ms} / ${r.submitP99Ms}`,
      "→finished p50/p99 ms": `${r.finishP50Ms} / ${r.finishP99Ms}`,
      pass: r.budgetTurnsPerSec === null ? "n/a" : r.pass ? "yes" : `NO (< ${r.budgetTurnsPerSec})`,
    })),
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv[2] === "--worker") {
    await workerMain(
      process.argv[3] ?? "",
      process.argv[4] === "collect" ? "collect" : "followup",
      Number(process.argv[5]),
    );
  } else {
    const turns = process.argv[2] ? Number(process.argv[2]) : undefined;
    const sessions = process.argv[3] ? Number(process.argv[3]) : undefined;
    const results = await run({ ...(turns ? { turns } : {}), ...(sessions ? { sessions } : {}) });
    if (!results[0]?.pass) process.exitCode = 1;
  }
}
