/**
 * fs store benchmark (DESIGN.md budgets): start-up with 100,000 sessions, `list({ limit: 200 })`
 * latency, `readTail({ limit: 100 })` on a 1,000,000-message transcript, and memory.
 *
 * The data is generated first (sessions through the API, the transcript written as raw lines
 * because a million API appends would dominate the run); the measurements then run in a fresh
 * plain-node child process (this file and the sources it imports are transpiled to a temp
 * dir first), so start-up and resident memory are not skewed by the generator or by tsx's
 * loader (~35 MB). Wall times suffer when other work shares the 2 cores, so CPU time of the
 * open and the load average are printed too.
 *
 *   npx tsx bench/store-fs.ts            # prints a table and one {"bench":"store-fs",…} line
 *   SB_BENCH_NODE_FLAGS="--max-semi-space-size=4" npx tsx bench/store-fs.ts   # child node flags
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { silentLogger } from "../src/log.js";
import { createFsStore } from "../src/store/fs/index.js";
import type { SessionEntry, TranscriptRef } from "../src/store/types.js";
import { DEPLOYED_ENV, DEPLOYED_NODE_FLAGS } from "./deployed.js";

/** SB_BENCH_SESSIONS=1000000 runs the scale figures (issue 18: 1M sessions). */
const SESSIONS = Number(process.env.SB_BENCH_SESSIONS ?? 100_000);
const SCALE = SESSIONS >= 1_000_000;
const K = SESSIONS >= 1_000_000 ? `${SESSIONS / 1_000_000}M` : `${Math.round(SESSIONS / 1000)}k`;
const MESSAGES = 1_000_000;
const AGENTS = ["main", "research", "ops", "support", "dev"];
const REF: TranscriptRef = { agentId: "main", sessionId: "bench-transcript" };
const ITERATIONS = 200;

export interface StoreFsBenchResult {
  bench: "store-fs";
  sessions: number;
  messages: number;
  generateSessionsMs: number;
  generateTranscriptMs: number;
  transcriptBytes: number;
  loadAverage: number;
  openMs: number;
  openCpuMs: number;
  /** How the open loaded the snapshot (FsSessionStore.snapshotLoad): "sidecar" in steady state. */
  openFrom: string;
  /** The same open without the sidecar (the first open after an upgrade: the snapshot scanned). */
  scanOpenMs: number;
  scanOpenCpuMs: number;
  scanRssAfterOpenMb: number;
  listFirstMs: number;
  listMedianMs: number;
  listAgentMedianMs: number;
  listKindsMedianMs: number;
  listRareKindMedianMs: number;
  listSearchMedianMs: number;
  readTailFirstMs: number;
  readTailMedianMs: number;
  readTailNoToolsMedianMs: number;
  readTailRssDeltaMb: number;
  countFirstMs: number;
  countMedianMs: number;
  appendPerSec: number;
  rssBaselineMb: number;
  rssAfterOpenMb: number;
  rssDeltaMb: number;
  rssEndMb: number;
  peakRssMb: number;
}

type Measured = Omit<
  StoreFsBenchResult,
  | "bench"
  | "sessions"
  | "messages"
  | "generateSessionsMs"
  | "generateTranscriptMs"
  | "transcriptBytes"
  | "loadAverage"
  | "scanOpenMs"
  | "scanOpenCpuMs"
  | "scanRssAfterOpenMb"
>;

function sessionEntry(i: number, now: number): SessionEntry {
  const agentId = AGENTS[i % AGENTS.length]!;
  const shape = i % 4;
  const key =
    i < AGENTS.length
      ? `agent:${agentId}:main`
      : shape === 0
        ? `agent:${agentId}:telegram:group:-100${i}`
        : shape === 1
          ? `agent:${agentId}:direct:user${i}`
          : shape === 2
            ? `agent:${agentId}:subagent:${randomUUID()}`
            : `agent:${agentId}:slack:channel:c${i}`;
  // updatedAt spread over 30 days in random order, so the index really has to sort
  const updatedAt = now - Math.floor(Math.random() * 30 * 24 * 3600_000);
  const e: SessionEntry = {
    key,
    sessionId: randomUUID(),
    agentId,
    createdAt: updatedAt - 3600_000,
    updatedAt,
    channel: "telegram",
    chatType: shape === 1 ? "direct" : "group",
    displayName: `Conversation ${i}`,
    lastChannel: "telegram",
    lastTo: String(100_000 + i),
    lastAccountId: "default",
    deliveryContext: { channel: "telegram", to: String(100_000 + i), accountId: "default" },
    contextTokens: 128_000,
    totalTokens: 1000 + i,
    inputTokens: 700 + i,
    outputTokens: 300,
    model: "openai/gpt-4.1",
  };
  if (shape === 2) {
    e.spawnedBy = `agent:${agentId}:main`;
    e.spawnDepth = 1;
    e.label = `worker-${i}`;
  }
  return e;
}

async function generateSessions(stateDir: string): Promise<number> {
  const t = performance.now();
  const store = await createFsStore({ stateDir, logger: silentLogger() });
  const now = Date.now();
  const BATCH = 2000;
  for (let i = 0; i < SESSIONS; i += BATCH) {
    const puts: Array<Promise<void>> = [];
    for (let k = i; k < Math.min(SESSIONS, i + BATCH); k++)
      puts.push(store.sessions.put(sessionEntry(k, now)));
    await Promise.all(puts);
  }
  await store.sessions.compact(); // steady state: one snapshot, a short live log
  await store.close();
  return performance.now() - t;
}

async function generateTranscript(stateDir: string): Promise<{ ms: number; bytes: number }> {
  const t = performance.now();
  const dir = path.join(stateDir, "agents", REF.agentId, "sessions");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const out = createWriteStream(path.join(dir, `${REF.sessionId}.jsonl`), { mode: 0o600 });
  const roles = ["user", "assistant", "toolCall", "toolResult"] as const;
  let bytes = 0;
  let chunk = "";
  const base = Date.now() - MESSAGES * 1000;
  for (let i = 0; i < MESSAGES; i++) {
    const role = roles[i % 4]!;
    const content =
      role === "toolCall"
        ? { name: "sessions_list", args: { limit: 10 } }
        : role === "toolResult"
          ? { ok: true, rows: i % 7 }
          : `message ${i}: the quick brown fox jumps over the lazy dog, again and again and again.`;
    const m: Record<string, unknown> = {
      id: `m${i}`,
      sessionId: REF.sessionId,
      role,
      content,
      timestamp: base + i * 1000,
    };
    if (role === "assistant") m.usage = { input: 120, output: 45 };
    chunk += `${JSON.stringify(m)}\n`;
    if (chunk.length > 1 << 20) {
      bytes += Buffer.byteLength(chunk);
      if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()));
      chunk = "";
    }
  }
  bytes += Buffer.byteLength(chunk);
  out.write(chunk);
  await new Promise<void>((resolve, reject) =>
    out.end((err?: Error | null) => (err ? reject(err) : resolve())),
  );
  return { ms: performance.now() - t, bytes };
}

const mb = (bytes: number) => Math.round((bytes / (1024 * 1024)) * 10) / 10;
const round = (ms: number) => Math.round(ms * 1000) / 1000;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function medianOf(fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < ITERATIONS; i++) times.push(await timed(fn));
  return median(times);
}

/** Runs in the fresh child process. */
async function measure(stateDir: string): Promise<Measured> {
  const rssBaseline = process.memoryUsage().rss;
  let store!: Awaited<ReturnType<typeof createFsStore>>;
  const cpu0 = process.cpuUsage();
  const openMs = await timed(async () => {
    store = await createFsStore({ stateDir, logger: silentLogger() });
  });
  const cpu = process.cpuUsage(cpu0);
  const rssAfterOpen = process.memoryUsage().rss;
  if ((await store.sessions.count()) !== SESSIONS) throw new Error("bench: sessions missing after open");
  const openFrom = store.sessions.snapshotLoad;

  const listFirstMs = await timed(() => store.sessions.list({ limit: 200 }));
  const listMedianMs = await medianOf(() => store.sessions.list({ limit: 200 }));
  const listAgentMedianMs = await medianOf(() => store.sessions.list({ agentId: "research", limit: 200 }));
  const listKindsMedianMs = await medianOf(() => store.sessions.list({ kinds: ["group"], limit: 200 }));
  const listRareKindMedianMs = await medianOf(() => store.sessions.list({ kinds: ["main"], limit: 200 }));
  const listSearchMedianMs = await medianOf(() =>
    store.sessions.list({ search: "conversation 4242", limit: 200 }),
  );

  const rssBeforeTail = process.memoryUsage().rss;
  const readTailFirstMs = await timed(() =>
    store.transcripts.readTail(REF, { limit: 100, includeTools: true }),
  );
  const readTailMedianMs = await medianOf(() =>
    store.transcripts.readTail(REF, { limit: 100, includeTools: true }),
  );
  const readTailNoToolsMedianMs = await medianOf(() => store.transcripts.readTail(REF, { limit: 100 }));
  const readTailRssDelta = process.memoryUsage().rss - rssBeforeTail;
  const last = await store.transcripts.readTail(REF, { limit: 1 });
  if (last[0]?.id !== `m${MESSAGES - 3}`) throw new Error(`bench: unexpected last message ${last[0]?.id}`);

  const countFirstMs = await timed(() => store.transcripts.count(REF));
  const countMedianMs = await medianOf(() => store.transcripts.count(REF));

  const APPENDS = 5000;
  const ref = { agentId: "main", sessionId: "bench-appends" };
  const appendMs = await timed(async () => {
    for (let i = 0; i < APPENDS; i++) {
      await store.transcripts.append(ref, {
        id: `a${i}`,
        sessionId: ref.sessionId,
        role: "user",
        content: "hi",
        timestamp: i,
      });
    }
  });
  const peakRss = process.resourceUsage().maxRSS * 1024;

  const rssEnd = process.memoryUsage().rss;
  await store.close();
  return {
    openMs: round(openMs),
    openCpuMs: Math.round((cpu.user + cpu.system) / 1000),
    openFrom,
    listFirstMs: round(listFirstMs),
    listMedianMs: round(listMedianMs),
    listAgentMedianMs: round(listAgentMedianMs),
    listKindsMedianMs: round(listKindsMedianMs),
    listRareKindMedianMs: round(listRareKindMedianMs),
    listSearchMedianMs: round(listSearchMedianMs),
    readTailFirstMs: round(readTailFirstMs),
    readTailMedianMs: round(readTailMedianMs),
    readTailNoToolsMedianMs: round(readTailNoToolsMedianMs),
    readTailRssDeltaMb: mb(readTailRssDelta),
    countFirstMs: round(countFirstMs),
    countMedianMs: round(countMedianMs),
    appendPerSec: Math.round(APPENDS / (appendMs / 1000)),
    rssBaselineMb: mb(rssBaseline),
    rssAfterOpenMb: mb(rssAfterOpen),
    rssDeltaMb: mb(rssAfterOpen - rssBaseline),
    rssEndMb: mb(rssEnd),
    peakRssMb: mb(peakRss),
  };
}

/**
 * Transpiles this file and every source it reaches through relative imports into `outDir`
 * (same tree, `.js`), with node_modules linked, so the child runs on plain node.
 */
async function transpileSelf(outDir: string): Promise<string> {
  const ts = (await import("typescript")).default;
  const self = fileURLToPath(import.meta.url);
  const root = path.resolve(path.dirname(self), "..");
  const todo = [self];
  const seen = new Set<string>();
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const source = readFileSync(file, "utf8");
    for (const m of source.matchAll(/from\s+"(\.{1,2}\/[^"]+)\.js"/g))
      todo.push(path.resolve(path.dirname(file), `${m[1]}.ts`));
    const js = ts.transpileModule(source, {
      fileName: file,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const out = path.join(outDir, path.relative(root, file)).replace(/\.ts$/, ".js");
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, js);
  }
  writeFileSync(path.join(outDir, "package.json"), '{"type":"module"}\n');
  symlinkSync(path.join(root, "node_modules"), path.join(outDir, "node_modules"), "dir");
  return path.join(outDir, path.relative(root, self)).replace(/\.ts$/, ".js");
}

/**
 * Node flags for the measuring child. Default: the flags `npm start` runs the gateway with
 * (bench/deployed.ts, whose environment it always gets), so memory is measured as deployed;
 * SB_BENCH_NODE_FLAGS="" measures without the flags.
 */
function childNodeFlags(): string[] {
  const flags = process.env.SB_BENCH_NODE_FLAGS;
  return flags === undefined ? [...DEPLOYED_NODE_FLAGS] : flags.split(/\s+/).filter(Boolean);
}

/** Runs in a fresh child: the open alone (the parent has moved the sidecar away). */
async function measureOpen(stateDir: string): Promise<ScanOpen> {
  const cpu0 = process.cpuUsage();
  const t = performance.now();
  const store = await createFsStore({ stateDir, logger: silentLogger() });
  const scanOpenMs = performance.now() - t;
  const cpu = process.cpuUsage(cpu0);
  const scanRssAfterOpenMb = mb(process.memoryUsage().rss);
  if (store.sessions.snapshotLoad !== "scan") throw new Error("bench: the scan open did not scan");
  await store.close();
  return {
    scanOpenMs: round(scanOpenMs),
    scanOpenCpuMs: Math.round((cpu.user + cpu.system) / 1000),
    scanRssAfterOpenMb,
  };
}

type ScanOpen = Pick<StoreFsBenchResult, "scanOpenMs" | "scanOpenCpuMs" | "scanRssAfterOpenMb">;

/** The script the measuring children run: this file, transpiled once when it runs under tsx. */
async function childScript(workDir: string): Promise<string> {
  const self = fileURLToPath(import.meta.url);
  return self.endsWith(".ts") ? transpileSelf(path.join(workDir, "js")) : self;
}

function measureInChild<T>(
  script: string,
  stateDir: string,
  mode: "--measure" | "--measure-open",
): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...childNodeFlags(), script, mode, stateDir], {
      env: { ...process.env, ...DEPLOYED_ENV },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`bench child exited with ${code}`));
      const line = out.trim().split("\n").at(-1) ?? "";
      resolve(JSON.parse(line) as T);
    });
  });
}

export async function run(): Promise<StoreFsBenchResult> {
  const workDir = mkdtempSync(path.join(os.tmpdir(), "sb-bench-fs-"));
  // SB_BENCH_STATE_DIR=<dir> keeps the generated state there and reuses it on the next run
  // (generating 1M sessions takes minutes): for iterating on the open path
  const keep = process.env.SB_BENCH_STATE_DIR;
  const stateDir = keep ? path.resolve(keep) : path.join(workDir, "state");
  try {
    const reuse = keep !== undefined && existsSync(path.join(stateDir, "sessions"));
    const generateSessionsMs = reuse ? 0 : await generateSessions(stateDir);
    const tr = reuse ? { ms: 0, bytes: 0 } : await generateTranscript(stateDir);
    const loadAverage = Math.round(os.loadavg()[0]! * 100) / 100;
    const script = await childScript(workDir);
    const m = await measureInChild<Measured>(script, stateDir, "--measure");
    // the first open after an upgrade (no sidecar yet): the snapshot's lines are scanned
    const idx = path.join(stateDir, "sessions", "index.snapshot.idx");
    renameSync(idx, `${idx}.bench`);
    let scan: ScanOpen;
    try {
      scan = await measureInChild<ScanOpen>(script, stateDir, "--measure-open");
    } finally {
      renameSync(`${idx}.bench`, idx);
    }
    const result: StoreFsBenchResult = {
      bench: "store-fs",
      sessions: SESSIONS,
      messages: MESSAGES,
      loadAverage,
      generateSessionsMs: Math.round(generateSessionsMs),
      generateTranscriptMs: Math.round(tr.ms),
      transcriptBytes: tr.bytes,
      ...m,
      ...scan,
    };
    printTable(result);
    console.log(JSON.stringify(result));
    return result;
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

function printTable(r: StoreFsBenchResult): void {
  const rows: Array<[string, string, string]> = [
    [`create ${K} sessions via API (+ compaction)`, `${r.generateSessionsMs} ms`, ""],
    ["write 1M-message transcript (raw)", `${r.generateTranscriptMs} ms`, `${mb(r.transcriptBytes)} MB`],
    [`open with ${K} sessions: wall`, `${r.openMs} ms`, SCALE ? "≤ 3000 ms" : "≤ 1000 ms"],
    [`open with ${K} sessions: CPU (all threads)`, `${r.openCpuMs} ms`, `from the ${r.openFrom}`],
    [`open with ${K} sessions, no sidecar (scan): wall`, `${r.scanOpenMs} ms`, "first open after upgrading"],
    [`open with ${K} sessions, no sidecar (scan): CPU`, `${r.scanOpenCpuMs} ms`, ""],
    [`RSS after the scan open`, `${r.scanRssAfterOpenMb} MB`, ""],
    ["list limit 200: first", `${r.listFirstMs} ms`, "≤ 50 ms"],
    ["list limit 200: median", `${r.listMedianMs} ms`, "≤ 5 ms"],
    ["list agentId limit 200: median", `${r.listAgentMedianMs} ms`, ""],
    ["list kinds=group limit 200: median", `${r.listKindsMedianMs} ms`, ""],
    [`list kinds=main (5 of ${K}): median`, `${r.listRareKindMedianMs} ms`, ""],
    ["list search (full scan): median", `${r.listSearchMedianMs} ms`, ""],
    ["readTail limit 100 (tools): first", `${r.readTailFirstMs} ms`, ""],
    ["readTail limit 100 (tools): median", `${r.readTailMedianMs} ms`, "≤ 10 ms"],
    ["readTail limit 100 (no tools): median", `${r.readTailNoToolsMedianMs} ms`, "≤ 10 ms"],
    ["readTail RSS delta", `${r.readTailRssDeltaMb} MB`, "≤ 50 MB"],
    ["count 1M: first (one scan)", `${r.countFirstMs} ms`, ""],
    ["count 1M: median (cached)", `${r.countMedianMs} ms`, ""],
    ["append via API, one at a time", `${r.appendPerSec} /s`, ""],
    ["RSS baseline (child, before open)", `${r.rssBaselineMb} MB`, ""],
    [`RSS after open (${K} sessions loaded)`, `${r.rssAfterOpenMb} MB`, SCALE ? "≤ 400 MB" : "≤ 150 MB"],
    ["RSS delta from open", `${r.rssDeltaMb} MB`, ""],
    ["RSS at the end (after tails, count scan, appends)", `${r.rssEndMb} MB`, ""],
    ["peak RSS (child)", `${r.peakRssMb} MB`, ""],
  ];
  const w0 = Math.max(...rows.map((x) => x[0].length));
  const w1 = Math.max(...rows.map((x) => x[1].length));
  console.log(
    `\nstore-fs bench (${r.sessions.toLocaleString("en")} sessions, ${r.messages.toLocaleString("en")} messages; ` +
      `plain-node child${childNodeFlags().length > 0 ? ` with ${childNodeFlags().join(" ")}` : ""}; ` +
      `1-min load average ${r.loadAverage} on ${os.cpus().length} cores)`,
  );
  console.log(`${"measure".padEnd(w0)}  ${"value".padStart(w1)}  budget`);
  for (const [a, b, c] of rows) console.log(`${a.padEnd(w0)}  ${b.padStart(w1)}  ${c}`);
}

const isMain =
  process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const i = process.argv.indexOf("--measure");
  const o = process.argv.indexOf("--measure-open");
  if (i !== -1 || o !== -1) {
    (i !== -1 ? measure(process.argv[i + 1]!) : measureOpen(process.argv[o + 1]!)).then(
      (m) => console.log(JSON.stringify(m)),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  } else {
    run().catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
  }
}
