/**
 * The real path (DESIGN.md § Budgets, issue 18): the built gateway started exactly as `npm start`
 * starts it (bench/deployed.ts: `MALLOC_ARENA_MAX=2 node --max-semi-space-size=4
 * bin/switchboard.js start`), token auth, the `openai` provider against a loopback
 * OpenAI-compatible model that answers in a fixed ~2 ms, the default `coding` tool profile —
 * driven over `POST /rpc` like a client. Figures: the model called directly
 * (the floor), 100 sequential turns to one session, 30 turns with a new key each, 16- and 64-client
 * throughput, the gateway's CPU per turn from /proc/<pid>/stat (in the sequential phase also its
 * main thread's, from /proc/<pid>/task/<pid>/stat: the rest is V8's background compiler and GC,
 * and libuv's pool) and its RSS; on local, the 64-client phase once more with `queue.concurrency: 64`
 * (the default 8 is what caps that phase). The same on redis +
 * bullmq with one and two worker processes (their CPU is added to the gateway's), and with one worker
 * running every turn (`queue.runTurns: false` on the gateway). Yardsticks from the
 * same run: a bare Node relay and a bare BullMQ relay (bench/bare-relay.ts) through the same phases,
 * and each setup's CPU/turn and turns/s against them (BENCH_GATEWAY_RELAY=0 skips them).
 *
 * BENCH_GATEWAY_SECONDS (default 20) sets each throughput window; BENCH_GATEWAY_SEQ_TURNS (default
 * 100) the sequential phase, BENCH_GATEWAY_PHASES=seq stops after it (for profiling); BENCH_GATEWAY_CLIENTS
 * ("16,64" by default) the loaded phases' client counts; BENCH_GATEWAY_DRIVERS
 * ("local,bullmq", default both) picks the drivers; BENCH_GATEWAY_LONG_TURNS=100000 adds the memory
 * figures (RSS after that many more turns, and after a minute without traffic) on local;
 * BENCH_GATEWAY_WARMUP (default 8000) the turns run before anything is measured (V8 still optimises
 * per-turn code for thousands of turns: after 3,000 its compiler threads took 0.1–0.5 ms a turn
 * of the sequential phase, after 8,000 about 0.02; every 25th warm-up turn opens a new session, as
 * real traffic does, so the first new session measured does not deoptimise code tuned to old ones,
 * and the others rotate over enough sessions that none passes 150 turns); BENCH_GATEWAY_STDOUT=1 shows the gateways' stdout (with
 * BENCH_GATEWAY_NODE_FLAGS=--trace-gc, say); BENCH_GATEWAY_STREAM_WARMUP (default 300) the streamed turns
 * run over /ws before the first-delta figure is measured (a turn streams only while someone
 * watches, so the phases before it leave that path cold); BENCH_GATEWAY_CACHE_CHARS the gateways'
 * `storage.transcriptCacheChars` (default 8M). Profiling: BENCH_GATEWAY_WRAP, BENCH_GATEWAY_THREADS and
 * BENCH_GATEWAY_SEQ_SIGNAL (see `phaseProbe`).
 *
 * Every setup runs with `gateway.metrics.enabled: false` (metrics are on by default): those are the
 * plain figures. After the fs+local one, `telemetryOverhead` prints what metrics (no OTLP endpoint)
 * and metrics with an OTLP endpoint add to a turn's CPU, against metrics off measured alongside
 * (BENCH_GATEWAY_TELEMETRY=0 skips it, =only measures nothing else; _TELEMETRY_WARMUP,
 * _TELEMETRY_ROUNDS size it). Then
 * `budgetOverhead` prints what a configured budget adds to a turn's CPU, against no budget
 * (BENCH_GATEWAY_BUDGETS=0 skips it, =only measures nothing else; _BUDGETS_WARMUP, _BUDGETS_ROUNDS).
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { TailCacheStats } from "../src/store/types.js";
import { machineReference } from "./machine.js";
import { envFlags, freePort, rssMb, spawnDeployed, stopProc, threadNs, waitHealthy } from "./proc.js";
import { readText } from "./read-text.js";

const MODEL_DELAY_MS = 2;
const TOKEN = "bench-token-0123456789abcdef";
const CLK_TCK = 100; // Linux USER_HZ
const RELAY = fileURLToPath(new URL("./bare-relay.js", import.meta.url));

const fmt = (n: number, d = 2) => n.toFixed(d);
const out = (s: string) => process.stdout.write(`${s}\n`);

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
}

/** A minimal OpenAI-compatible model: a fixed reply after MODEL_DELAY_MS (JSON or SSE). */
interface Model {
  url: string;
  server: Server;
  calls: () => number;
  /** performance.now() of each streamed reply's first chunk, by the reply's text. */
  firstChunkAt: Map<string, number>;
}

async function startModel(): Promise<Model> {
  let calls = 0;
  const firstChunkAt = new Map<string, number>();
  const server = createServer((req, res) => {
    void readText(req).then((body) => {
      calls++;
      const stream = body.includes('"stream":true');
      setTimeout(() => {
        const usage = { prompt_tokens: 40, completion_tokens: 8, total_tokens: 48 };
        if (!stream) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              id: `c${calls}`,
              object: "chat.completion",
              created: 0,
              model: "bench",
              choices: [{ index: 0, message: { role: "assistant", content: "pong" }, finish_reason: "stop" }],
              usage,
            }),
          );
          return;
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        // A user message "delta:<n>" is answered "d<n>" in two chunks 10 ms apart, its first chunk timed.
        const tag = [...body.matchAll(/"delta:(\d+)"/g)].at(-1)?.[1]; // the newest user message
        const chunk = (delta: Record<string, unknown>, finish: string | null, u?: unknown) =>
          `data: ${JSON.stringify({ id: `c${calls}`, object: "chat.completion.chunk", created: 0, model: "bench", choices: [{ index: 0, delta, finish_reason: finish }], ...(u ? { usage: u } : {}) })}\n\n`;
        const rest = () => {
          res.write(chunk({ content: tag === undefined ? "ng" : "." }, null));
          res.write(chunk({}, "stop", usage));
          res.end("data: [DONE]\n\n");
        };
        res.write(chunk({ role: "assistant", content: tag === undefined ? "po" : `d${tag}` }, null));
        if (tag === undefined) return rest();
        firstChunkAt.set(`d${tag}`, performance.now());
        setTimeout(rest, 10);
      }, MODEL_DELAY_MS);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1`, server, calls: () => calls, firstChunkAt };
}

/** utime and stime of `pid` (every thread), or of its main thread alone, in clock ticks. */
function cpuSplit(pid: number, mainThread = false): { user: number; sys: number } {
  const stat = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { user: Number(fields[11]), sys: Number(fields[12]) };
}

/**
 * The bench's client: node:http with keep-alive (fetch costs the load generator about twice the CPU
 * per call, and it shares the 2 cores with the gateway it measures).
 */
const clientAgent = new Agent({ keepAlive: true, maxSockets: 256 });

/** POSTs JSON over the keep-alive agent; resolves with the response body. */
function postJson(url: string, payload: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        agent: clientAgent,
        headers: {
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(payload)),
          ...headers,
        },
      },
      (res) => {
        readText(res).then(resolve, reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

async function rpc(url: string, method: string, params: Record<string, unknown>): Promise<unknown> {
  const raw = await postJson(`${url}/rpc`, JSON.stringify({ id: 1, method, params }), {
    authorization: `Bearer ${TOKEN}`,
  });
  const body = JSON.parse(raw) as { ok: boolean; result?: unknown; error?: { message: string } };
  if (!body.ok) throw new Error(`${method}: ${body.error?.message}`);
  return body.result;
}

/** The gateway's transcript tail cache use (`health.transcriptCache`), or null without one. */
async function tailCache(url: string): Promise<TailCacheStats | null> {
  const h = (await rpc(url, "health", {})) as { transcriptCache?: TailCacheStats };
  return h.transcriptCache ?? null;
}

async function turn(url: string, sessionKey: string): Promise<number> {
  const t0 = performance.now();
  const r = (await rpc(url, "chat.send", { sessionKey, message: "ping", timeoutSeconds: 30 })) as {
    status: string;
    error?: string;
  };
  if (r.status !== "ok") throw new Error(`turn ${sessionKey}: ${r.status} ${r.error ?? ""}`);
  return performance.now() - t0;
}

/** Starts the gateway CLI with `args` (`gateway` false: `args` are a script and its arguments). */
function startNode(args: string[], stderr: string[], gateway = true): ChildProcess {
  return spawnDeployed(gateway ? ["bin/switchboard.js", ...args] : args, {
    stderr,
    stdout: Boolean(process.env.BENCH_GATEWAY_STDOUT),
    nodeFlags: envFlags(process.env.BENCH_GATEWAY_NODE_FLAGS),
    // Profiling aid: BENCH_GATEWAY_WRAP="valgrind --tool=callgrind --instr-atstart=no …" runs the
    // gateway under that command (the sequential phase then switches callgrind's counting on).
    wrap: gateway ? envFlags(process.env.BENCH_GATEWAY_WRAP) : [],
  });
}

async function throughput(
  url: string,
  clients: number,
  seconds: number,
  tag: string,
): Promise<{ turns: number; perSec: number; p50: number }> {
  const until = performance.now() + seconds * 1000;
  const lat: number[] = [];
  let n = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      let i = 0;
      while (performance.now() < until) {
        lat.push(await turn(url, `agent:main:bench:${tag}:${c}:${i++ % 4}`));
        n++;
      }
    }),
  );
  return { turns: n, perSec: n / seconds, p50: quantile(lat, 0.5) };
}

/** The loaded phases' client counts: BENCH_GATEWAY_CLIENTS ("16,64" by default). */
function clientCounts(): number[] {
  return (process.env.BENCH_GATEWAY_CLIENTS ?? "16,64")
    .split(",")
    .map(Number)
    .filter((n) => n > 0);
}

/** What one setup measured, for the ratios against the bare relay. */
interface Figures {
  /** Sequential turns: median latency and CPU per turn (ms). */
  /** `onCpuMs`: the same CPU from schedstat (ns), free of the clock tick's 10 ms steps. */
  seq: { p50: number; cpuMs: number; onCpuMs: number };
  /** By client count: turns/s and CPU per turn (ms). */
  clients: Record<number, { perSec: number; cpuMs: number }>;
}

/**
 * The processes' CPU in clock ticks: `user` and `sys` of every thread, and `main`, what their main
 * threads (the event loops) used; the rest is V8's background compiler and GC and libuv's pool.
 */
function cpuOf(pids: () => number[]): { user: number; sys: number; main: number } {
  return pids().reduce(
    (s, p) => {
      const c = cpuSplit(p);
      const m = cpuSplit(p, true);
      return { user: s.user + c.user, sys: s.sys + c.sys, main: s.main + m.user + m.sys };
    },
    { user: 0, sys: 0, main: 0 },
  );
}

/**
 * Warm-up: V8 optimises a function only after it ran hot for a while (the first few hundred turns
 * run partly unoptimised code); every 25th turn opens a new session, as real traffic does, so the
 * first new session measured does not deoptimise code tuned to old ones. Spread over 16 sessions
 * so no measured session starts with a long history.
 */
/**
 * The warm-up's recurring sessions take at most this many turns each: a session past ~200 turns
 * fills the 400-message context read, is compacted (a second model call) and then again about every
 * 200 turns (450 sequential turns from a new session make 452 model calls), and every turn reads a
 * full window: a path no measured phase takes (its figures would follow code V8 tuned to another
 * workload).
 */
const WARM_TURNS_PER_SESSION = 150;

async function warmUp(
  url: string,
  warmup = Number(process.env.BENCH_GATEWAY_WARMUP ?? 8000),
  /** The turns already warmed (a warm-up taken in slices: see `sideBySide`) and the total. */
  slice: { from: number; total: number } = { from: 0, total: warmup },
): Promise<void> {
  const sessions = Math.max(16, Math.ceil(slice.total / WARM_TURNS_PER_SESSION));
  for (let i = slice.from; i < slice.from + warmup; i++)
    await turn(
      url,
      i % 25 === 24 ? `agent:main:bench:warm:new:${i}` : `agent:main:bench:warm:${i % sessions}`,
    );
}

/**
 * Profiling aids around the sequential phase (nothing happens without their variables):
 * BENCH_GATEWAY_THREADS=1 prints each thread's CPU per turn (schedstat, ns) and the phase's
 * start and end on the monotonic clock (for `perf report --time`); BENCH_GATEWAY_WRAP holding
 * "callgrind" switches callgrind's counting on for the phase only and dumps it at the end;
 * BENCH_GATEWAY_SEQ_SIGNAL=SIGUSR2 (say) sends that signal to the gateway at both ends (for a
 * preloaded counter or marker).
 */
function phaseProbe(pids: () => number[], name: string): { end: (turns: number) => void } {
  const gw = String(pids()[0]);
  const signal = process.env.BENCH_GATEWAY_SEQ_SIGNAL as NodeJS.Signals | undefined;
  const callgrind = process.env.BENCH_GATEWAY_WRAP?.includes("callgrind") === true;
  const threads = process.env.BENCH_GATEWAY_THREADS ? threadNs(pids) : undefined;
  const now = () => fmt(Number(process.hrtime.bigint()) / 1e9, 6);
  if (threads) out(`${name}: sequential phase starts at monotonic ${now()} s`);
  if (callgrind) execFileSync("callgrind_control", ["-i", "on", gw], { stdio: "ignore" });
  if (signal) process.kill(Number(gw), signal);
  return {
    end(turns) {
      if (signal) process.kill(Number(gw), signal);
      if (callgrind) {
        execFileSync("callgrind_control", ["-d", gw], { stdio: "ignore" });
        execFileSync("callgrind_control", ["-i", "off", gw], { stdio: "ignore" });
      }
      if (!threads) return;
      out(`${name}: sequential phase ends at monotonic ${now()} s`);
      const per = [...threadNs(pids)].map(
        ([tid, ns]) => `${tid}:${fmt((ns - (threads.get(tid) ?? 0)) / 1000 / turns, 0)}`,
      );
      out(`${name}: each thread's CPU per turn (µs, by process/thread id): ${per.join(" ")}`);
    },
  };
}

/** Sequential turns to one session: latency and the processes' CPU per turn. */
async function sequential(
  url: string,
  pids: () => number[],
  name: string,
  floorMs: number,
  cpuBudget: string,
  /** The fake model's request count: more than one call a turn means extra work (a compaction, say). */
  modelCalls: () => number,
): Promise<Figures["seq"]> {
  const seqTurns = Number(process.env.BENCH_GATEWAY_SEQ_TURNS ?? 100);
  const probe = phaseProbe(pids, name);
  const calls0 = modelCalls();
  const s0 = cpuOf(pids);
  const n0 = threadNs(pids);
  const seq: number[] = [];
  for (let i = 0; i < seqTurns; i++) seq.push(await turn(url, "agent:main:bench:seq"));
  const s1 = cpuOf(pids);
  let onCpuNs = 0;
  for (const [tid, ns] of threadNs(pids)) onCpuNs += ns - (n0.get(tid) ?? 0);
  const onCpuMs = onCpuNs / 1e6 / seqTurns;
  probe.end(seqTurns);
  const perTurn = (ticks: number) => (ticks * 1000) / CLK_TCK / seqTurns;
  const cpuMs = perTurn(s1.user - s0.user + s1.sys - s0.sys);
  const p50 = quantile(seq, 0.5);
  out(
    `${name}: ${seqTurns} sequential turns, one session: median ${fmt(p50)} ms, p95 ${fmt(quantile(seq, 0.95))} ms; ` +
      `minus the model's own ${fmt(p50 - floorMs)} ms${cpuBudget ? " [≤ 1.5]" : ""}; CPU/turn ${fmt(cpuMs)} ms ` +
      `(user ${fmt(perTurn(s1.user - s0.user))}, system ${fmt(perTurn(s1.sys - s0.sys))}; ` +
      `main threads ${fmt(perTurn(s1.main - s0.main))}, the rest V8's compiler and GC, libuv's pool)` +
      (cpuBudget ? ` [≤ ${cpuBudget}]` : "") +
      `; to the µs (schedstat, every thread) ${fmt(onCpuMs, 3)} ms` +
      `; ${modelCalls() - calls0} model calls for the ${seqTurns} turns`,
  );
  return { p50, cpuMs, onCpuMs };
}

/** `clients` concurrent clients for `seconds`: turns/s and the processes' CPU per turn. */
async function loaded(
  url: string,
  pids: () => number[],
  name: string,
  clients: number,
  seconds: number,
  budget: string,
): Promise<{ perSec: number; cpuMs: number }> {
  const cpu = () => {
    const c = cpuOf(pids);
    return c.user + c.sys;
  };
  const c0 = cpu();
  const b0 = process.cpuUsage();
  const t = await throughput(url, clients, seconds, `c${clients}`);
  const cpuMs = ((cpu() - c0) * 1000) / CLK_TCK / Math.max(1, t.turns);
  const b1 = process.cpuUsage(b0);
  const benchMs = (b1.user + b1.system) / 1000 / Math.max(1, t.turns);
  out(
    `${name}: ${clients} clients × ${seconds} s: ${fmt(t.perSec, 0)} turns/s${budget}, ` +
      `latency p50 ${fmt(t.p50)} ms, CPU/turn ${fmt(cpuMs)} ms (the bench's own clients + model: ${fmt(benchMs)} ms)`,
  );
  return { perSec: t.perSec, cpuMs };
}

/**
 * The yardstick (bench/bare-relay.ts): the least a Node gateway does per turn, measured with the
 * same warm-up, sequential and loaded phases, so the gateway's figures read against it.
 */
async function runBareRelay(
  model: Model,
  floorMs: number,
  seconds: number,
  bullmq?: { redisUrl: string; prefix: string },
): Promise<Figures | null> {
  const dir = mkdtempSync(path.join(tmpdir(), "sb-bench-relay-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const stderr: string[] = [];
  const name = bullmq ? "bare BullMQ relay, 1 worker" : "bare Node relay";
  const relayArgs = [RELAY, String(port), model.url, dir, TOKEN];
  if (bullmq) relayArgs.push(bullmq.redisUrl, bullmq.prefix);
  const relay = startNode(relayArgs, stderr, false);
  const workers = bullmq
    ? [startNode([RELAY, "worker", model.url, bullmq.redisUrl, bullmq.prefix], stderr, false)]
    : [];
  try {
    await waitHealthy(url, relay);
    await warmUp(url);
    const pids = () => [relay.pid, ...workers.map((w) => w.pid)].filter((p): p is number => p !== undefined);
    const figures: Figures = {
      seq: await sequential(url, pids, name, floorMs, "", model.calls),
      clients: {},
    };
    if (process.env.BENCH_GATEWAY_PHASES === "seq") return figures;
    for (const clients of clientCounts())
      figures.clients[clients] = await loaded(url, pids, name, clients, seconds, "");
    return figures;
  } catch (err) {
    out(`${name}: FAILED ${(err as Error).message}\n${stderr.join("").slice(0, 2000)}`);
    return null;
  } finally {
    await Promise.all([...workers.map(stopProc), stopProc(relay)]);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Deletes the bench's keys (`{<prefix>…`) from Redis. */
async function dropKeys(redisUrl: string, prefix: string): Promise<void> {
  const { Redis } = await import("ioredis");
  const client = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.connect();
    let cursor = "0";
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `{${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await client.unlink(...keys);
    } while (cursor !== "0");
  } catch (err) {
    out(`could not remove the bench's Redis keys ({${prefix}…): ${(err as Error).message}`);
  } finally {
    client.disconnect();
  }
}

/** The gateway's figures as multiples of the bare relay's (CPU: how many times; turns/s: what share). */
function againstRelay(name: string, g: Figures, r: Figures, yardstick: string): void {
  const parts = [
    `sequential CPU/turn ${fmt(g.seq.cpuMs / r.seq.cpuMs)}× (schedstat: ${fmt(g.seq.onCpuMs / r.seq.onCpuMs)}×)`,
  ];
  for (const c of [16, 64]) {
    const gc = g.clients[c];
    const rc = r.clients[c];
    if (gc && rc)
      parts.push(
        `${c} clients: CPU/turn ${fmt(gc.cpuMs / rc.cpuMs)}×, turns/s ${fmt((100 * gc.perSec) / rc.perSec, 0)}%`,
      );
  }
  out(`${name} against the ${yardstick}: ${parts.join("; ")}`);
}

interface Setup {
  name: string;
  storage: Record<string, unknown>;
  queue: Record<string, unknown>;
  workers: number;
  /** Only the 64-client phase and the RSS (a tuning comparison with the setup before it). */
  loadedOnly?: boolean;
}

/**
 * Time to first delta: a /ws client sees `run.delta` for a streamed reply; the overhead is its
 * arrival minus the moment the model wrote its first chunk (both clocks are this process's).
 */
async function firstDeltaOverhead(url: string, model: Model, turns: number): Promise<number[]> {
  const { WebSocket } = await import("ws");
  const ws = new WebSocket(`${url.replace("http", "ws")}/ws?token=${TOKEN}`);
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  const seen = new Map<string, number>();
  ws.on("message", (data: Buffer) => {
    const at = performance.now();
    const frame = JSON.parse(data.toString()) as { event?: string; data?: { text?: string } };
    const text = frame.event === "run.delta" ? frame.data?.text : undefined;
    const tag = text ? /d\d+/.exec(text)?.[0] : undefined;
    if (tag && !seen.has(tag)) seen.set(tag, at);
  });
  // The other phases ask for no stream (no /ws client watches them), so the streaming path is
  // still cold here: warm it first, as a gateway serving streaming clients has it, then measure.
  const warm = Number(process.env.BENCH_GATEWAY_STREAM_WARMUP ?? 300);
  for (let i = 0; i < warm; i++) {
    await rpc(url, "chat.send", {
      sessionKey: "agent:main:bench:stream:warm",
      message: `delta:${1_000_000 + i}`,
      timeoutSeconds: 30,
    });
  }
  const out: number[] = [];
  for (let i = 0; i < turns; i++) {
    await rpc(url, "chat.send", {
      sessionKey: "agent:main:bench:stream",
      message: `delta:${i}`,
      timeoutSeconds: 30,
    });
    const chunkAt = model.firstChunkAt.get(`d${i}`);
    const deltaAt = seen.get(`d${i}`);
    if (chunkAt !== undefined && deltaAt !== undefined) out.push(deltaAt - chunkAt);
  }
  ws.close();
  return out;
}

async function runSetup(
  setup: Setup,
  model: Model,
  floorMs: number,
  seconds: number,
): Promise<Figures | null> {
  const dir = mkdtempSync(path.join(tmpdir(), "sb-bench-gw-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const cfg = {
    // Metrics off: the plain figures (telemetryOverhead measures metrics and OTLP against them).
    gateway: { host: "127.0.0.1", port, auth: { token: TOKEN }, metrics: { enabled: false } },
    stateDir: path.join(dir, "state"),
    // BENCH_GATEWAY_CACHE_CHARS: storage.transcriptCacheChars (sizing experiments; default 8M)
    storage: process.env.BENCH_GATEWAY_CACHE_CHARS
      ? { ...setup.storage, transcriptCacheChars: Number(process.env.BENCH_GATEWAY_CACHE_CHARS) }
      : setup.storage,
    queue: setup.queue,
    models: {
      default: "fake/bench",
      providers: { fake: { kind: "openai", baseUrl: model.url, apiKey: "bench-key" } },
    },
    channels: { webchat: { enabled: false } },
  };
  const cfgFile = path.join(dir, "switchboard.json");
  writeFileSync(cfgFile, JSON.stringify(cfg));
  const stderr: string[] = [];
  const gw = startNode(["start", "--config", cfgFile], stderr);
  const workers = Array.from({ length: setup.workers }, () =>
    startNode(["worker", "--config", cfgFile], stderr),
  );
  const pids = () => [gw.pid, ...workers.map((w) => w.pid)].filter((p): p is number => p !== undefined);
  try {
    await waitHealthy(url, gw, process.env.BENCH_GATEWAY_WRAP ? 300_000 : 20_000);
    await warmUp(url);
    const rss = () =>
      out(
        `${setup.name}: RSS gateway ${fmt(rssMb(gw.pid ?? 0), 0)} MB${workers.map((w) => `, worker ${fmt(rssMb(w.pid ?? 0), 0)} MB`).join("")}`,
      );
    if (setup.loadedOnly) {
      await loaded(url, pids, setup.name, 64, seconds, " (the default's is above)");
      rss();
      return null;
    }
    const figures: Figures = {
      seq: await sequential(
        url,
        pids,
        setup.name,
        floorMs,
        setup.workers > 0 ? "2.0 gateway + worker" : "1.0",
        model.calls,
      ),
      clients: {},
    };
    if (process.env.BENCH_GATEWAY_PHASES === "seq") return figures;

    const deltas = await firstDeltaOverhead(url, model, 30);
    out(
      deltas.length > 0
        ? `${setup.name}: first delta after the model's first chunk (streamed, over /ws): median ${fmt(quantile(deltas, 0.5))} ms, p95 ${fmt(quantile(deltas, 0.95))} ms [≤ 1]`
        : `${setup.name}: first delta: no run.delta seen over /ws (streaming off?)`,
    );

    const fresh: number[] = [];
    for (let i = 0; i < 30; i++) fresh.push(await turn(url, `agent:main:bench:new:${i}`));
    out(
      `${setup.name}: 30 turns, a new key each: median ${fmt(quantile(fresh, 0.5))} ms, p95 ${fmt(quantile(fresh, 0.95))} ms`,
    );

    for (const clients of clientCounts()) {
      const budget = clients === 64 ? (setup.workers > 0 ? " [≥ 800]" : " [≥ 1,500]") : "";
      const cache0 = await tailCache(url);
      figures.clients[clients] = await loaded(url, pids, setup.name, clients, seconds, budget);
      const cache1 = await tailCache(url);
      if (cache0 && cache1) {
        // how often a turn found its session's tail out of memory (read from the store again)
        const turns = figures.clients[clients].perSec * seconds;
        const fills = cache1.fills - cache0.fills;
        out(
          `${setup.name}: ${clients} clients: the gateway's transcript tail cache ${fills} fills (${fmt((100 * fills) / Math.max(1, turns), 1)} per 100 turns), ` +
            `holding ${cache1.files} transcripts, ${fmt(cache1.chars / 2 ** 20, 1)} of ${fmt(cache1.maxChars / 2 ** 20, 0)} M chars`,
        );
      }
    }
    rss();
    const longTurns = Number(process.env.BENCH_GATEWAY_LONG_TURNS ?? 0);
    if (longTurns > 0 && setup.workers === 0) {
      let done = 0;
      const cache0 = await tailCache(url);
      const l0 = performance.now();
      await Promise.all(
        Array.from({ length: 32 }, async (_, c) => {
          for (let i = 0; done < longTurns; i++) {
            done++;
            await turn(url, `agent:main:bench:long:${c}:${i % 8}`);
          }
        }),
      );
      out(
        `${setup.name}: RSS after ${done.toLocaleString("en")} more turns: ${fmt(rssMb(gw.pid ?? 0), 0)} MB [≤ 150] ` +
          `(32 clients over 256 sessions, ${fmt(done / ((performance.now() - l0) / 1000), 0)} turns/s)`,
      );
      const cache1 = await tailCache(url);
      if (cache0 && cache1) {
        const fills = cache1.fills - cache0.fills;
        out(
          `${setup.name}: those turns: the tail cache ${fills} fills (${fmt((100 * fills) / Math.max(1, done), 1)} per 100 turns), ` +
            `holding ${cache1.files} transcripts, ${fmt(cache1.chars / 2 ** 20, 1)} of ${fmt(cache1.maxChars / 2 ** 20, 0)} M chars`,
        );
      }
      await new Promise((r) => setTimeout(r, 60_000));
      out(`${setup.name}: RSS after a minute without traffic: ${fmt(rssMb(gw.pid ?? 0), 0)} MB`);
    }
    return figures;
  } catch (err) {
    out(`${setup.name}: FAILED ${(err as Error).message}\n${stderr.join("").slice(0, 2000)}`);
    return null;
  } finally {
    await Promise.all([...workers.map(stopProc), stopProc(gw)]);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The main thread's time on CPU in ns (schedstat) of each process. */
function mainThreadNs(pids: number[]): number {
  let ns = 0;
  for (const p of pids) ns += Number(readFileSync(`/proc/${p}/task/${p}/schedstat`, "utf8").split(" ")[0]);
  return ns;
}

/** One gateway of a side-by-side figure: its name and what it adds to the plain fs+local config. */
interface Variant {
  name: string;
  /** Merged into `gateway`. */
  gateway?: Record<string, unknown>;
  /** Top-level keys set as they are (`telemetry`, `usage`, `models`). */
  top?: Record<string, unknown>;
}

/**
 * fs+local gateways side by side, one per variant: each is warmed with `warm` turns, then they take
 * `rounds` rounds of `perRound` sequential turns in turn, so load drift on the shared machine falls
 * on all alike. Each gateway's CPU (schedstat, every thread; and its main thread) is read from
 * before the first round to `settleMs` after the last, so it includes what the processes spend
 * between turns. CPU/turn of each variant, in order.
 */
async function sideBySide(
  model: Model,
  tag: string,
  variants: Variant[],
  opts: { warm: number; rounds: number; perRound: number; settleMs: number },
): Promise<Array<{ all: number; main: number }>> {
  const dir = mkdtempSync(path.join(tmpdir(), `sb-bench-${tag}-`));
  const stderr: string[] = [];
  const gws: Array<{ url: string; proc: ChildProcess }> = [];
  try {
    for (const [i, v] of variants.entries()) {
      const port = await freePort();
      const cfg = {
        gateway: { host: "127.0.0.1", port, auth: { token: TOKEN }, ...v.gateway },
        stateDir: path.join(dir, `state${i}`),
        storage: { driver: "fs" },
        queue: { driver: "local" },
        models: {
          default: "fake/bench",
          providers: { fake: { kind: "openai", baseUrl: model.url, apiKey: "bench-key" } },
        },
        channels: { webchat: { enabled: false } },
        ...v.top,
      };
      const cfgFile = path.join(dir, `switchboard${i}.json`);
      writeFileSync(cfgFile, JSON.stringify(cfg));
      const proc = startNode(["start", "--config", cfgFile], stderr);
      gws.push({ url: `http://127.0.0.1:${port}`, proc });
    }
    for (const g of gws) await waitHealthy(g.url, g.proc);
    // Warmed in turn, a slice each, so none sits idle for long while the others warm (a gateway
    // warmed first and then left idle measured ~1 ms/turn dearer than a copy of itself warmed last).
    const SLICE = 250;
    for (let from = 0; from < opts.warm; from += SLICE)
      for (const g of gws) await warmUp(g.url, Math.min(SLICE, opts.warm - from), { from, total: opts.warm });
    const pidOf = (g: (typeof gws)[number]) => [g.proc.pid ?? 0];
    const all0 = gws.map((g) => threadNs(() => pidOf(g)));
    const main0 = gws.map((g) => mainThreadNs(pidOf(g)));
    for (let r = 0; r < opts.rounds; r++)
      for (const g of gws)
        for (let i = 0; i < opts.perRound; i++)
          await turn(g.url, `agent:main:bench:${tag}:${(r * opts.perRound + i) % 4}`);
    await new Promise((r) => setTimeout(r, opts.settleMs));
    const turns = opts.rounds * opts.perRound;
    return gws.map((g, i) => {
      let ns = 0;
      for (const [tid, t] of threadNs(() => pidOf(g))) ns += t - (all0[i]?.get(tid) ?? 0);
      return { all: ns / 1e6 / turns, main: (mainThreadNs(pidOf(g)) - (main0[i] ?? 0)) / 1e6 / turns };
    });
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${stderr.join("").slice(0, 2000)}`);
  } finally {
    await Promise.all(gws.map((g) => stopProc(g.proc)));
    rmSync(dir, { recursive: true, force: true });
  }
}

const loadAverage = () =>
  loadavg()
    .map((l) => fmt(l))
    .join(" ");

/** Each variant's CPU/turn, then what each adds over the first (with its budget beside it). */
function printSideBySide(
  label: string,
  about: string,
  variants: Variant[],
  figures: Array<{ all: number; main: number }>,
  budgets: string[],
  extra = "",
): void {
  const base = figures[0] ?? { all: Number.NaN, main: Number.NaN };
  out(
    `${label} (${about}; load average ${loadAverage()}): ` +
      variants
        .map(
          (v, i) =>
            `${v.name} ${fmt(figures[i]?.all ?? Number.NaN, 3)} ms CPU/turn (main thread ${fmt(figures[i]?.main ?? Number.NaN, 3)})`,
        )
        .join("; "),
  );
  out(
    `${label}: CPU/turn over ${variants[0]?.name} (schedstat, every thread; main thread): ` +
      variants
        .slice(1)
        .map(
          (v, i) =>
            `${v.name} ${fmt((figures[i + 1]?.all ?? Number.NaN) - base.all, 3)} ms${budgets[i] ?? ""} (main ${fmt((figures[i + 1]?.main ?? Number.NaN) - base.main, 3)})`,
        )
        .join("; ") +
      extra,
  );
}

/**
 * What telemetry costs a turn (issue 51; API.md §8.6): three gateways side by side — metrics off
 * (the plain figure's config), metrics on (`gateway.metrics.enabled`, the default) with no OTLP
 * endpoint, and metrics on with `telemetry.otlp.endpoint` at a loopback receiver that answers
 * every `POST /v1/traces` 200. Each is warmed with BENCH_GATEWAY_TELEMETRY_WARMUP turns (default
 * 3000: fewer than the plain figure's, so its absolute CPU/turn reads higher; the deltas are what
 * this measures), then BENCH_GATEWAY_TELEMETRY_ROUNDS (default 30: at 10 the control's delta
 * ranged ±0.09 ms) rounds of 50 turns; CPU is
 * read to 1.5 s after the last (the span exporter batches every second, and may export while
 * another gateway runs), so it includes the event-loop-delay monitor and the batch exporter.
 */
async function telemetryOverhead(model: Model): Promise<void> {
  const received = { posts: 0, bytes: 0 };
  const receiver = createServer((req, res) => {
    void readText(req).then((body) => {
      if (req.method === "POST" && req.url === "/v1/traces") {
        received.posts++;
        received.bytes += body.length;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  const otlpUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const variants: Variant[] = [
    { name: "metrics off", gateway: { metrics: { enabled: false } } },
    { name: "metrics on, no OTLP", gateway: { metrics: { enabled: true } } },
    {
      name: "metrics on + OTLP",
      gateway: { metrics: { enabled: true } },
      top: { telemetry: { otlp: { endpoint: otlpUrl } } },
    },
    // the first config again: what two gateways of one config differ by is the noise floor
    { name: "metrics off again (control)", gateway: { metrics: { enabled: false } } },
  ];
  const warm = Number(process.env.BENCH_GATEWAY_TELEMETRY_WARMUP ?? 3000);
  const rounds = Number(process.env.BENCH_GATEWAY_TELEMETRY_ROUNDS ?? 30);
  const posts0 = received.posts;
  try {
    const figures = await sideBySide(model, "tel", variants, { warm, rounds, perRound: 50, settleMs: 1500 });
    printSideBySide(
      "telemetry",
      `fs+local, ${warm} warm turns each, ${rounds} × 50 sequential turns in turn`,
      variants,
      figures,
      [" [≤ +0.05]", " [≤ +0.3]", " [the noise floor]"],
      `; the OTLP receiver got ${received.posts - posts0} POST /v1/traces while measured`,
    );
  } catch (err) {
    out(`telemetry: FAILED ${(err as Error).message}`);
  } finally {
    await new Promise<void>((r) => receiver.close(() => r()));
  }
}

/**
 * What a budget costs a turn (issue 49; API.md §8.4: "≤ 0.1 ms more CPU than without"): two
 * gateways side by side on the path users run (`chat.send` over HTTP, the `openai` provider, fs +
 * local), the model priced in both, one with `usage.budgets` (a `block` budget on the agent and a
 * global one, limits far off) so every turn is admitted with a hold, its call reserved and settled
 * and the warnAt check made. BENCH_GATEWAY_BUDGETS_WARMUP (default 3000) and _ROUNDS (default 30,
 * of 50 turns each) size it; BENCH_GATEWAY_BUDGETS=0 skips it, =only runs nothing else.
 */
async function budgetOverhead(model: Model): Promise<void> {
  const models = {
    default: "fake/bench",
    providers: {
      fake: {
        kind: "openai",
        baseUrl: model.url,
        apiKey: "bench-key",
        models: { bench: { price: { inputPerMTok: 0.4, outputPerMTok: 1.6 } } },
      },
    },
  };
  const budgets = [
    { scope: "agent:main", period: "day", maxCostUsd: 1_000_000, action: "block" },
    { scope: "global", period: "month", maxCostUsd: 1_000_000, action: "block" },
  ];
  const variants: Variant[] = [
    { name: "no budget", gateway: { metrics: { enabled: false } }, top: { models } },
    { name: "budgets", gateway: { metrics: { enabled: false } }, top: { models, usage: { budgets } } },
    // the first config again: what two gateways of one config differ by is the noise floor
    { name: "no budget again (control)", gateway: { metrics: { enabled: false } }, top: { models } },
  ];
  const warm = Number(process.env.BENCH_GATEWAY_BUDGETS_WARMUP ?? 3000);
  const rounds = Number(process.env.BENCH_GATEWAY_BUDGETS_ROUNDS ?? 30);
  try {
    const figures = await sideBySide(model, "budget", variants, {
      warm,
      rounds,
      perRound: 50,
      settleMs: 200,
    });
    printSideBySide(
      "budgets",
      `fs+local, chat.send, ${warm} warm turns each, ${rounds} × 50 sequential turns in turn`,
      variants,
      figures,
      [" [≤ +0.1]", " [the noise floor]"],
    );
  } catch (err) {
    out(`budgets: FAILED ${(err as Error).message}`);
  }
}

export async function run(): Promise<void> {
  const seconds = Number(process.env.BENCH_GATEWAY_SECONDS ?? 20);
  const drivers = (process.env.BENCH_GATEWAY_DRIVERS ?? "local,bullmq").split(",");
  out(
    `load average at start: ${loadavg()
      .map((l) => fmt(l))
      .join(" ")}; machine reference ${fmt(machineReference(), 1)} ms`,
  );
  const model = await startModel();
  try {
    // The floor: the same model called directly, as the provider would (one HTTP request).
    const direct: number[] = [];
    for (let i = 0; i < 100; i++) {
      const t0 = performance.now();
      JSON.parse(
        await postJson(
          `${model.url}/chat/completions`,
          JSON.stringify({ model: "bench", messages: [{ role: "user", content: "ping" }] }),
        ),
      );
      direct.push(performance.now() - t0);
    }
    const floor = quantile(direct, 0.5);
    out(`model called directly (the floor): median ${fmt(floor)} ms, p95 ${fmt(quantile(direct, 0.95))} ms`);
    if (process.env.BENCH_GATEWAY_BUDGETS === "only" || process.env.BENCH_GATEWAY_TELEMETRY === "only") {
      if (process.env.BENCH_GATEWAY_TELEMETRY === "only") await telemetryOverhead(model);
      if (process.env.BENCH_GATEWAY_BUDGETS === "only") await budgetOverhead(model);
      return;
    }
    const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
    const prefix = `sbbench${process.pid}`;
    const setups: Setup[] = [];
    if (drivers.includes("local")) {
      setups.push({ name: "fs+local", storage: { driver: "fs" }, queue: { driver: "local" }, workers: 0 });
      // The default queue.concurrency (8) caps the 64-client phase: turns wait for a slot while
      // the model answers, not for CPU. The same phase with 64 slots shows what the cap costs.
      if (clientCounts().includes(64))
        setups.push({
          name: "fs+local, queue.concurrency 64",
          storage: { driver: "fs" },
          queue: { driver: "local", concurrency: 64 },
          workers: 0,
          loadedOnly: true,
        });
    }
    if (drivers.includes("bullmq")) {
      for (const workers of [1, 2]) {
        setups.push({
          name: `redis+bullmq, ${workers} worker${workers > 1 ? "s" : ""}`,
          storage: { driver: "redis", redisUrl, prefix: `${prefix}w${workers}` },
          // Its own queue prefix too: the default ("sb") is a running gateway's on the same Redis.
          queue: { driver: "bullmq", redisUrl, concurrency: 64, prefix: `${prefix}q${workers}` },
          workers,
        });
      }
      // the default gateway also runs turns (a second consumer); here the one worker runs them all
      setups.push({
        name: "redis+bullmq, 1 worker, gateway runs no turns",
        storage: { driver: "redis", redisUrl, prefix: `${prefix}w1n` },
        queue: { driver: "bullmq", redisUrl, concurrency: 64, prefix: `${prefix}q1n`, runTurns: false },
        workers: 1,
      });
    }
    const relays = process.env.BENCH_GATEWAY_RELAY !== "0";
    const relay = relays && drivers.includes("local") ? await runBareRelay(model, floor, seconds) : null;
    const bullRelay =
      relays && drivers.includes("bullmq")
        ? await runBareRelay(model, floor, seconds, { redisUrl, prefix: `${prefix}relay` })
        : null;
    for (const s of setups) {
      const figures = await runSetup(s, model, floor, seconds);
      const yardstick = s.workers > 0 ? bullRelay : relay;
      if (figures && yardstick)
        againstRelay(s.name, figures, yardstick, s.workers > 0 ? "bare BullMQ relay" : "bare Node relay");
      // beside the plain figure (metrics off): what metrics and OTLP tracing add to a turn
      if (s.name === "fs+local" && process.env.BENCH_GATEWAY_TELEMETRY !== "0")
        await telemetryOverhead(model);
      // and what a configured budget adds
      if (s.name === "fs+local" && process.env.BENCH_GATEWAY_BUDGETS !== "0") await budgetOverhead(model);
    }
    if (drivers.includes("bullmq")) await dropKeys(redisUrl, prefix);
  } finally {
    await new Promise<void>((r) => model.server.close(() => r()));
    out(
      `load average at end: ${loadavg()
        .map((l) => fmt(l))
        .join(" ")}; machine reference ${fmt(machineReference(), 1)} ms`,
    );
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  await run();
}
