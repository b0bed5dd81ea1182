/**
 * Pipeline overhead per turn through the whole gateway (DESIGN.md budget: ≥ 3,000 turns/s on
 * `local` across 1,000 sessions): fs store + local pipeline + a zero-latency scripted model, no
 * tools, an in-memory channel for delivery. Measures enqueue → delivered.
 * Run: `npm run bench` (all) or `npx tsx bench/turns.ts`.
 * `BENCH_TURNS=n` changes the number of turns; `BENCH_CPU_PROFILE=file.cpuprofile` writes a V8
 * CPU profile of the measured part only (start-up and seeding left out). Then `budgetsOverhead`
 * (BENCH_TURNS_BUDGETS=0 skips it, =only runs it alone).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { type App, createApp } from "../src/app/index.js";
import type { ChannelAdapter, OutboundMessage } from "../src/channels/types.js";
import { parseConfig } from "../src/config/index.js";
import { silentLogger } from "../src/log.js";

const SESSIONS = 1000;
const TURNS = Number(process.env.BENCH_TURNS ?? 10_000);
const PROFILE = process.env.BENCH_CPU_PROFILE;

async function startProfile(): Promise<Session | null> {
  if (!PROFILE) return null;
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return session;
}

async function stopProfile(session: Session | null): Promise<void> {
  if (!session || !PROFILE) return;
  const { profile } = await session.post("Profiler.stop");
  writeFileSync(PROFILE, JSON.stringify(profile));
  session.disconnect();
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

export async function run(): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sb-bench-turns-"));
  const config = parseConfig({
    stateDir: dir,
    queue: { concurrency: 8, mode: "followup" },
    models: {
      default: "s/zero",
      providers: { s: { kind: "scripted", rules: [{ match: ".", reply: "ok" }] } },
    },
    tools: { profile: "minimal", deny: ["*"] },
  });
  const app = await createApp(
    { config, source: null, baseDir: dir },
    {
      logger: silentLogger(),
      // "gateway": the local queue runs inside the gateway process; port 0 keeps the bench off fixed ports
      role: "gateway",
      host: "127.0.0.1",
      port: 0,
    },
  );
  const submitted = new Map<string, number>();
  const latencies: number[] = [];
  let delivered = 0;
  let done!: () => void;
  const finished = new Promise<void>((r) => {
    done = r;
  });
  const channel: ChannelAdapter = {
    channel: "bench",
    accountId: "default",
    capabilities: { textLimit: 4000, threads: false, typing: false, markdown: "plain", createThread: false },
    async start() {},
    async stop() {},
    status: () => ({ state: "connected" }),
    async send(msg: OutboundMessage) {
      delivered++;
      if (delivered === TURNS) done();
      return { messageIds: [msg.to] };
    },
  };
  (app.services.channels as unknown as { add(a: ChannelAdapter): void }).add(channel);
  app.services.bus.on("run.finished", ({ run }) => {
    const t0 = submitted.get(run.runId);
    if (t0 !== undefined) latencies.push(performance.now() - t0);
  });
  await app.start();
  const { store, pipeline } = app.services;
  const now = Date.now();
  for (let i = 0; i < SESSIONS; i++) {
    await store.sessions.put({
      key: `agent:main:bench:direct:u${i}`,
      sessionId: crypto.randomUUID(),
      agentId: "main",
      createdAt: now,
      updatedAt: now,
      deliveryContext: { channel: "bench", to: `u${i}`, accountId: "default" },
    });
  }
  const rss0 = process.memoryUsage().rss;
  const profiler = await startProfile();
  // CPU time of the whole process (main thread + libuv pool): steadier than wall time on a shared box
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const inflight: Array<Promise<unknown>> = [];
  for (let i = 0; i < TURNS; i++) {
    const key = `agent:main:bench:direct:u${i % SESSIONS}`;
    const at = performance.now();
    inflight.push(
      pipeline
        .submitTurn({ sessionKey: key, agentId: "main", text: `m${i}`, deliver: true, origin: "inbound" })
        .then((r) => submitted.set(r.runId, at)),
    );
    if (inflight.length >= 200) await Promise.all(inflight.splice(0));
  }
  await Promise.all(inflight);
  await finished;
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await stopProfile(profiler);
  const sorted = latencies.sort((a, b) => a - b);
  const result = {
    bench: "turns-local",
    turns: TURNS,
    sessions: SESSIONS,
    turnsPerSec: Math.round(TURNS / elapsed),
    p50Ms: Number(quantile(sorted, 0.5).toFixed(2)),
    p99Ms: Number(quantile(sorted, 0.99).toFixed(2)),
    cpuMsPerTurn: Number(((cpu.user + cpu.system) / 1000 / TURNS).toFixed(3)),
    cpuSysShare: Number((cpu.system / Math.max(1, cpu.user + cpu.system)).toFixed(2)),
    rssMB: Math.round(process.memoryUsage().rss / 1e6),
    rssDeltaMB: Math.round((process.memoryUsage().rss - rss0) / 1e6),
    budget: "≥ 3,000 turns/s",
  };
  process.stdout.write(
    `turns through the gateway (local, fs): ${result.turnsPerSec} turns/s over ${TURNS} turns / ${SESSIONS} sessions; ` +
      `enqueue→finished p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms; cpu ${result.cpuMsPerTurn} ms/turn ` +
      `(${Math.round(result.cpuSysShare * 100)}% sys); rss ${result.rssMB} MB (budget ${result.budget})\n`,
  );
  process.stdout.write(`${JSON.stringify(result)}\n`);
  await app.stop();
  rmSync(dir, { recursive: true, force: true });
  return result;
}

/**
 * What a configured budget adds to a turn's CPU (issue 49; API.md §8.4: "≤ 0.1 ms"), in process:
 * two apps (fs + local, the scripted model priced in both), one with `usage.budgets` (a `block`
 * budget on the agent and a global one, limits far off), each turn a `chat.send` through the RPC
 * dispatcher (admission with a hold, the call reserved and settled, the warnAt check). Rounds of
 * BENCH_TURNS_BUDGET_ROUND turns (default 500, 16 at a time) alternate between the two apps, so
 * load drift falls on both; the process's CPU of each app's rounds is summed.
 */
export async function budgetsOverhead(): Promise<Record<string, unknown>> {
  const perRound = Number(process.env.BENCH_TURNS_BUDGET_ROUND ?? 500);
  const rounds = Number(process.env.BENCH_TURNS_BUDGET_ROUNDS ?? 12);
  const models = {
    default: "s/zero",
    providers: {
      s: {
        kind: "scripted",
        rules: [{ match: ".", reply: "ok" }],
        models: { zero: { price: { inputPerMTok: 0.4, outputPerMTok: 1.6 } } },
      },
    },
  };
  const budgets = [
    { scope: "agent:main", period: "day", maxCostUsd: 1_000_000, action: "block" },
    { scope: "global", period: "month", maxCostUsd: 1_000_000, action: "block" },
  ];
  const apps: App[] = [];
  const dirs: string[] = [];
  for (const usage of [{ budgets: [] }, { budgets }]) {
    const dir = mkdtempSync(path.join(os.tmpdir(), "sb-bench-budgets-"));
    dirs.push(dir);
    const config = parseConfig({
      stateDir: dir,
      queue: { concurrency: 16 },
      models,
      tools: { profile: "minimal", deny: ["*"] },
      usage,
      gateway: { metrics: { enabled: false } },
    });
    const app = await createApp(
      { config, source: null, baseDir: dir },
      { logger: silentLogger(), role: "gateway", host: "127.0.0.1", port: 0, serve: false },
    );
    await app.start();
    apps.push(app);
  }
  let id = 0;
  const turns = async (app: App, n: number) => {
    for (let i = 0; i < n; i += 16)
      await Promise.all(
        Array.from({ length: Math.min(16, n - i) }, async (_, j) => {
          const r = await app.rpc.dispatch({
            id: ++id,
            method: "chat.send",
            params: { sessionKey: `agent:main:b${(i + j) % 64}`, message: `m${i + j}`, timeoutSeconds: 30 },
          });
          if (!r.ok || (r.result as { status?: string }).status !== "ok")
            throw new Error(`chat.send failed: ${JSON.stringify(r)}`);
        }),
      );
  };
  // warm both (V8 tunes the per-turn code over the first thousands)
  for (let r = 0; r < 4; r++) for (const app of apps) await turns(app, perRound);
  const cpu = [0, 0];
  for (let r = 0; r < rounds; r++)
    for (const [i, app] of apps.entries()) {
      const c0 = process.cpuUsage();
      await turns(app, perRound);
      const c = process.cpuUsage(c0);
      cpu[i] = (cpu[i] ?? 0) + c.user + c.system;
    }
  const n = rounds * perRound;
  const without = (cpu[0] ?? 0) / 1000 / n;
  const withBudget = (cpu[1] ?? 0) / 1000 / n;
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
  const result = {
    bench: "turns-budgets",
    turns: n,
    cpuMsPerTurnNoBudget: Number(without.toFixed(4)),
    cpuMsPerTurnBudget: Number(withBudget.toFixed(4)),
    addedMs: Number((withBudget - without).toFixed(4)),
    loadAverage: load,
    budget: "≤ +0.1 ms",
  };
  process.stdout.write(
    `budgets in process (chat.send via the RPC dispatcher, fs + local, ${rounds} × ${perRound} turns each in turn; load average ${load}): ` +
      `no budget ${without.toFixed(4)} ms CPU/turn, budgets ${withBudget.toFixed(4)} ms: ${(withBudget - without).toFixed(4)} ms a turn (budget ≤ +0.1)\n`,
  );
  process.stdout.write(`${JSON.stringify(result)}\n`);
  for (const app of apps) await app.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  return result;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  if (process.env.BENCH_TURNS_BUDGETS !== "only") await run();
  if (process.env.BENCH_TURNS_BUDGETS !== "0") await budgetsOverhead();
}
