/**
 * Pipeline overhead of the local driver: zero-latency turn handler, 1,000 sessions, 20,000 turns.
 * Measures turns/s from the first submit to the last `run.finished`, and submit latency (until the
 * request is journaled and the run record written). Budget (DESIGN.md): ≥ 3,000 turns/s.
 *
 *   npx tsx bench/pipeline-local.ts [turns] [sessions]
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { silentLogger } from "../src/log.js";
import { createLocalPipeline } from "../src/pipeline/local/index.js";
import { MemoryRunStore } from "../test/helpers/memory-store.js";

export interface PipelineLocalResult {
  bench: "pipeline-local";
  mode: "collect" | "followup";
  fsync: boolean;
  turns: number;
  /** Handler invocations (fewer than `turns` when collect mode folded messages). */
  handlerCalls: number;
  sessions: number;
  concurrency: number;
  producers: number;
  seconds: number;
  turnsPerSec: number;
  submitP50Ms: number;
  submitP99Ms: number;
  journalBytes: number;
  compactions: number;
  budgetTurnsPerSec: number;
  pass: boolean;
}

const BUDGET = 3000;

async function once(opts: {
  turns: number;
  sessions: number;
  mode: "collect" | "followup";
  fsync: boolean;
  concurrency: number;
  producers: number;
}): Promise<PipelineLocalResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sb-bench-pipe-"));
  try {
    const pipeline = createLocalPipeline({
      stateDir: dir,
      runs: new MemoryRunStore(),
      logger: silentLogger(),
      concurrency: opts.concurrency,
      mode: opts.mode,
      fsync: opts.fsync,
    });
    let handled = 0;
    let handlerCalls = 0;
    await pipeline.start({
      turn: async (job) => {
        handlerCalls++;
        handled += job.messages.length;
        return { status: "ok", reply: "" };
      },
      background: async () => {},
    });
    let finished = 0;
    let resolveAll!: () => void;
    const allDone = new Promise<void>((r) => {
      resolveAll = r;
    });
    pipeline.onRunEvent((e) => {
      if (e.type !== "run.finished") return;
      finished++;
      if (finished === opts.turns) resolveAll();
    });

    const latencies: number[] = [];
    let next = 0;
    const t0 = performance.now();
    // `producers` concurrent callers, each submitting its next message once the previous is accepted
    // (like inbound webhooks/RPC calls), spread round-robin over the sessions.
    const producer = async () => {
      while (next < opts.turns) {
        const i = next++;
        const s0 = performance.now();
        await pipeline.submitTurn({
          sessionKey: `agent:main:bench:${i % opts.sessions}`,
          agentId: "main",
          text: `message ${i}`,
          deliver: true,
          origin: "inbound",
        });
        latencies.push(performance.now() - s0);
      }
    };
    await Promise.all(Array.from({ length: opts.producers }, producer));
    await allDone;
    const seconds = (performance.now() - t0) / 1000;
    const stats = pipeline.journalStats();
    await pipeline.stop();
    if (handled !== opts.turns) throw new Error(`handled ${handled} messages, expected ${opts.turns}`);
    latencies.sort((a, b) => a - b);
    const pct = (p: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
    const turnsPerSec = Math.round(opts.turns / seconds);
    return {
      bench: "pipeline-local",
      mode: opts.mode,
      fsync: opts.fsync,
      turns: opts.turns,
      handlerCalls,
      sessions: opts.sessions,
      concurrency: opts.concurrency,
      producers: opts.producers,
      seconds: Number(seconds.toFixed(3)),
      turnsPerSec,
      submitP50Ms: Number(pct(0.5).toFixed(3)),
      submitP99Ms: Number(pct(0.99).toFixed(3)),
      journalBytes: stats.fileBytes,
      compactions: stats.compactions,
      budgetTurnsPerSec: BUDGET,
      pass: turnsPerSec >= BUDGET,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs the bench, prints a table and one JSON line (`{"bench":"pipeline-local", …}`), returns the rows. */
export async function run(opts: { turns?: number; sessions?: number } = {}): Promise<PipelineLocalResult[]> {
  const turns = opts.turns ?? 20_000;
  const sessions = opts.sessions ?? 1000;
  const base = { turns, sessions, concurrency: 8, producers: 100 };
  // Warm-up (JIT) on a small run, not reported.
  await once({ ...base, turns: 2000, mode: "followup", fsync: true });
  const results: PipelineLocalResult[] = [];
  // First row = the shipped defaults (fsync on); the others show the cost of fsync and collect mode.
  results.push(await once({ ...base, mode: "followup", fsync: true }));
  results.push(await once({ ...base, mode: "collect", fsync: true }));
  results.push(await once({ ...base, mode: "followup", fsync: false }));
  printTable(results);
  console.log(JSON.stringify({ ...results[0], variants: results.slice(1) }));
  return results;
}

function printTable(results: PipelineLocalResult[]): void {
  const rows = results.map((r) => ({
    mode: r.mode,
    fsync: r.fsync,
    turns: r.turns,
    "handler calls": r.handlerCalls,
    sessions: r.sessions,
    "turns/s": r.turnsPerSec,
    "submit p50 ms": r.submitP50Ms,
    "submit p99 ms": r.submitP99Ms,
    "journal KB": Math.round(r.journalBytes / 1024),
    compactions: r.compactions,
    pass: r.pass ? "yes" : `NO (< ${r.budgetTurnsPerSec})`,
  }));
  console.table(rows);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const turns = process.argv[2] ? Number(process.argv[2]) : undefined;
  const sessions = process.argv[3] ? Number(process.argv[3]) : undefined;
  const results = await run({ ...(turns ? { turns } : {}), ...(sessions ? { sessions } : {}) });
  if (!results.every((r) => r.pass)) process.exitCode = 1;
}
