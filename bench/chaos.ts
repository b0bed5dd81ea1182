/**
 * Chaos run (issue 11, "nothing lost, nothing twice"): streams turns, sub-agent spawns and
 * sessions_send into real gateway processes and SIGKILLs them at random moments, restarting each
 * time; then checks what the fake platform and the store hold:
 *   lost        acked messages whose run did not end ok with its reply posted
 *   dupLines    transcript lines whose id appears twice in one transcript
 *   dupPosts    posts made twice on the fake platform — per delivery idempotency key (the fake
 *               records the key of the delivery that posted) and per text — with no re-send
 *               logged; dupPostsResent: those the gateway logged as re-sent after a crash that
 *               fell between the platform's yes and the outbox mark (the README's window)
 *   spawns / badAnnounces   sub-agents, and those not announced exactly once (or spawned twice)
 * Drivers: "local" (fs store + local queue, one gateway process) and "bullmq" (redis store +
 * bullmq queue: one gateway and two worker processes on a random key prefix, each killed in turn).
 * `npm run chaos` prints the figures; test/integration/chaos*.test.ts run short versions.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { openStore } from "../src/app/index.js";
import { parseConfig } from "../src/config/index.js";
import { silentLogger } from "../src/log.js";
import { RedisKeys } from "../src/store/redis/index.js";
import { scriptArgs, tracked } from "./proc.js";

export type ChaosDriver = "local" | "bullmq";

export interface ChaosOptions {
  driver?: ChaosDriver;
  /** SIGKILLs (each followed by a restart of the killed process); a final life drains the work. */
  kills: number;
  /** How long each life is fed before its kill, at random in [min, max] ms. */
  lifeMs: [number, number];
  /** Messages in flight at once. */
  concurrency: number;
  /** Stop feeding after this many sends (bounds the work the final life drains). */
  maxSent?: number;
  seed?: number;
  /** bullmq: the Redis to use (a random key prefix keeps the run apart). */
  redisUrl?: string;
  log?: (line: string) => void;
}

export interface ChaosFigures {
  driver: ChaosDriver;
  kills: number;
  /** Kills per process role. */
  killed: { gateway: number; worker: number };
  sent: number;
  acked: number;
  lost: number;
  dupLines: number;
  /** Posts made twice with no re-send logged: a bug. */
  dupPosts: number;
  /** Posts made twice because a crash fell between the platform's yes and the mark (README). */
  dupPostsResent: number;
  /** Chunks the gateways logged as re-sent after an interrupted send. */
  resends: number;
  spawns: number;
  badAnnounces: number;
  details: string[];
}

/** What must be zero after a chaos run (the one admitted duplicate, logged as re-sent, is left out). */
export function violations(
  f: ChaosFigures,
): Pick<ChaosFigures, "lost" | "dupLines" | "dupPosts" | "badAnnounces" | "details"> {
  return {
    lost: f.lost,
    dupLines: f.dupLines,
    dupPosts: f.dupPosts,
    badAnnounces: f.badAnnounces,
    details: f.details.filter((d) => !d.includes("re-sent after a crash before its mark (logged)")),
  };
}

export const NO_VIOLATIONS: ReturnType<typeof violations> = {
  lost: 0,
  dupLines: 0,
  dupPosts: 0,
  badAnnounces: 0,
  details: [],
};

const TOKEN = "chaos-test-token-0123456789abcdef";
const CHATS = ["agent:main:c1", "agent:main:c2", "agent:main:c3", "agent:main:peer"];

function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

type Role = "gateway" | "worker";
interface Proc {
  role: Role;
  name: string;
  child: ChildProcess;
  url: string;
}

/** Starts the fixture (the real app plus the file channel) as a gateway or a worker. */
function start(
  role: Role,
  name: string,
  configPath: string,
  sentPath: string,
  logs: string[],
): Promise<Proc> {
  const child = tracked(
    spawn(
      process.execPath,
      [...scriptArgs("test/fixtures/file-channel-gateway.ts"), configPath, sentPath, CHATS.join(",")],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ROLE: role } },
    ),
  );
  let out = "";
  const at = logs.push("") - 1;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${name} did not start:\n${out}`));
    }, 30_000);
    const on = (d: Buffer) => {
      logs[at] += d.toString();
      out += d.toString();
      const m = /READY (\d+|worker)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ role, name, child, url: m[1] === "worker" ? "" : `http://127.0.0.1:${m[1]}` });
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited ${code}:\n${out}`));
    });
  });
}

async function rpc(url: string, method: string, params: Record<string, unknown>) {
  const res = await fetch(`${url}/rpc`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ method, params }),
  });
  return (await res.json()) as { ok: boolean; result?: any; error?: { code: string; message: string } };
}

function kill(child: ChildProcess, signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => {
    child.once("exit", () => r());
    child.kill(signal);
  });
}

function chaosConfig(stateDir: string, driver: ChaosDriver, redisUrl: string, prefix: string) {
  return {
    stateDir,
    gateway: { port: 0, host: "127.0.0.1", auth: { token: TOKEN } },
    tools: { sessions: { visibility: "agent" } },
    ...(driver === "bullmq"
      ? {
          storage: { driver: "redis", redisUrl, prefix },
          // 1 s lock and stall check: a killed worker's turn moves on within ~2 s
          queue: {
            driver: "bullmq",
            redisUrl,
            prefix,
            mode: "followup",
            concurrency: 4,
            lockDurationMs: 1000,
            stalledIntervalMs: 1000,
          },
        }
      : // one turn per message, so each acked message has its own reply to look for
        { queue: { mode: "followup" } }),
    models: {
      default: "s/chaos",
      providers: {
        s: {
          kind: "scripted",
          rules: [
            {
              match: "^spawn (\\S+)$",
              toolCalls: [{ name: "sessions_spawn", args: { task: "child $1" } }],
              afterTools: "spawned $1",
              delayMs: 5,
            },
            {
              match: "^send (\\S+)$",
              toolCalls: [
                {
                  name: "sessions_send",
                  args: { sessionKey: "agent:main:peer", message: "relay $1", timeoutSeconds: 0 },
                },
              ],
              afterTools: "sent $1",
              delayMs: 5,
            },
            { match: "^(m\\S+)$", reply: "re: $1", delayMs: 20 },
            { match: "^([\\s\\S]*)$", reply: "ack: $1", delayMs: 10 },
          ],
        },
      },
    },
  };
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosFigures> {
  const driver = opts.driver ?? "local";
  const log = opts.log ?? (() => {});
  const random = rng(opts.seed ?? 42);
  const dir = mkdtempSync(path.join(os.tmpdir(), "sb-chaos-"));
  const configPath = path.join(dir, "config.json");
  const sentPath = path.join(dir, "sent.jsonl");
  const stateDir = path.join(dir, "state");
  const redisUrl = opts.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  const prefix = `chaos-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const raw = chaosConfig(stateDir, driver, redisUrl, prefix);
  writeFileSync(configPath, JSON.stringify(raw));
  const acked = new Map<string, { runId: string; text: string; chat: string }>();
  const logs: string[] = [];
  const killed = { gateway: 0, worker: 0 };
  let sent = 0;
  let seq = 0;
  const nextMessage = (): { chat: string; text: string } => {
    const n = ++seq;
    const r = random();
    const chat = CHATS[Math.floor(random() * 3)]!;
    if (r < 0.1) return { chat, text: `spawn s${n}` };
    if (r < 0.2) return { chat, text: `send x${n}` };
    return { chat, text: `m${n}` };
  };
  // each process as its (re)start: a restarted worker comes up while the next life runs
  const procs: Array<Promise<Proc>> = [];
  const launch = (role: Role, name: string) => {
    const p = start(role, name, configPath, sentPath, logs);
    p.catch(() => {}); // awaited later; a failed start is thrown there
    return p;
  };
  const observer = driver === "bullmq" ? await RedisObserver.open(raw, configPath, redisUrl, prefix) : null;
  try {
    procs.push(launch("gateway", "gateway"));
    await procs[0];
    if (driver === "bullmq") {
      // after the gateway: its first start creates the sessions they serve
      procs.push(launch("worker", "worker-a"));
      procs.push(launch("worker", "worker-b"));
      await Promise.all(procs);
    }
    // the victims take turns (gateway, worker, worker, …) from a random first one
    const first = Math.floor(random() * procs.length);
    for (let life = 0; life < opts.kills; life++) {
      const url = (await procs[0]!).url;
      const until = Date.now() + opts.lifeMs[0] + random() * (opts.lifeMs[1] - opts.lifeMs[0]);
      let stop = false;
      const senders = Array.from({ length: opts.concurrency }, async () => {
        while (!stop && Date.now() < until && sent < (opts.maxSent ?? Number.POSITIVE_INFINITY)) {
          const m = nextMessage();
          sent++;
          try {
            const r = await rpc(url, "chat.send", {
              sessionKey: m.chat,
              message: m.text,
              timeoutSeconds: 0,
              deliver: true,
            });
            if (r.ok && r.result?.runId)
              acked.set(m.text, { runId: r.result.runId, text: m.text, chat: m.chat });
          } catch {
            // the gateway died under the call: not acked
          }
        }
      });
      await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now())));
      const at = (first + life) % procs.length;
      const victim = await procs[at]!;
      await kill(victim.child);
      stop = true;
      await Promise.allSettled(senders);
      killed[victim.role]++;
      log(`kill ${life + 1}: ${victim.name}; acked so far ${acked.size} of ${sent}`);
      procs[at] = launch(victim.role, victim.name);
      if (victim.role === "gateway") await procs[at];
    }
    // final life: let everything finish
    const url = (await procs[0]!).url;
    await Promise.all(procs);
    log(`final life: waiting for ${acked.size} acked runs`);
    for (const a of acked.values()) await rpc(url, "agent.wait", { runId: a.runId, timeoutMs: 30_000 });
    // and every sub-agent run (its announce follows its end)
    const children = observer ? await observer.children() : childRuns(stateDir);
    for (const r of children.keys()) await rpc(url, "agent.wait", { runId: r, timeoutMs: 30_000 });
    log(`runs done (${children.size} sub-agents): waiting for the posts to settle`);
    let quiet = 0;
    let prev = -1;
    for (let i = 0; i < 200 && quiet < 8; i++) {
      const n = existsSync(sentPath) ? readFileSync(sentPath, "utf8").length : 0;
      quiet = n === prev ? quiet + 1 : 0;
      prev = n;
      await new Promise((r) => setTimeout(r, 250));
    }
    log("posts settled: stopping");
    await Promise.all(procs.map(async (p) => stopProc(await p)));
    const state = observer ? await observer.state(acked) : fsState(stateDir);
    return { ...check(state, sentPath, acked, logs), driver, kills: opts.kills, killed, sent };
  } finally {
    await Promise.all(procs.map((p) => p.then((x) => kill(x.child)).catch(() => {})));
    await observer?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** SIGTERM, and SIGKILL if it has not stopped within 10 s. */
async function stopProc(p: Proc): Promise<void> {
  const timer = setTimeout(() => p.child.kill("SIGKILL"), 10_000);
  await kill(p.child, "SIGTERM");
  clearTimeout(timer);
}

interface RunLike {
  runId: string;
  sessionKey: string;
  status: string;
  reply?: string;
  error?: string;
}

/** What the store holds at the end: runs, sub-agent runs (→ task), transcript line ids per file. */
interface ObservedState {
  runs: Map<string, RunLike>;
  children: Map<string, string>;
  transcripts: Array<{ name: string; ids: string[] }>;
}

/** Every sub-agent run named in the fs session index, with its task. */
function childRuns(stateDir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const f of ["index.jsonl", "index.snapshot.jsonl"].map((n) => path.join(stateDir, "sessions", n))) {
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, "utf8").split("\n")) {
      const m = /"subagent":\{"task":"([^"]*)","runId":"([^"]+)"/.exec(line);
      if (m) out.set(m[2]!, m[1]!);
    }
  }
  return out;
}

/** The fs store's files, read as they are on disk (a duplicate line is seen even if reads hide it). */
function fsState(stateDir: string): ObservedState {
  // the runs as the RunStore holds them (journal + snapshot, last record wins)
  const runs = new Map<string, RunLike>();
  for (const f of ["runs.snapshot.jsonl", "runs.jsonl"].map((n) => path.join(stateDir, "runs", n))) {
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, "utf8").split("\n")) {
      try {
        const r = JSON.parse(line) as { op?: string; run?: RunLike };
        if (r.op === "put" && r.run) runs.set(r.run.runId, r.run);
      } catch {
        // header or torn line
      }
    }
  }
  const sessionsDir = path.join(stateDir, "agents", "main", "sessions");
  const transcripts: ObservedState["transcripts"] = [];
  for (const f of existsSync(sessionsDir) ? readdirSync(sessionsDir) : []) {
    if (!f.endsWith(".jsonl")) continue;
    const ids: string[] = [];
    for (const line of readFileSync(path.join(sessionsDir, f), "utf8").split("\n")) {
      if (!line.trim()) continue;
      try {
        ids.push((JSON.parse(line) as { id: string }).id);
      } catch {
        // a torn line (cut at the next open)
      }
    }
    transcripts.push({ name: f, ids });
  }
  return { runs, children: childRuns(stateDir), transcripts };
}

/** The redis store, read from this process: the store API for records, XRANGE for raw transcripts. */
class RedisObserver {
  private constructor(
    private readonly store: Awaited<ReturnType<typeof openStore>>,
    private readonly client: Redis,
    private readonly keys: RedisKeys,
    private readonly prefix: string,
  ) {}

  static async open(raw: object, configPath: string, url: string, prefix: string): Promise<RedisObserver> {
    const store = await openStore(
      { config: parseConfig(raw), source: configPath, baseDir: path.dirname(configPath) },
      silentLogger(),
    );
    return new RedisObserver(
      store,
      new Redis(url, { maxRetriesPerRequest: 3 }),
      new RedisKeys(prefix),
      prefix,
    );
  }

  async children(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const e of await this.store.store.sessions.list({ includeArchived: true, limit: 100_000 }))
      if (e.subagent) out.set(e.subagent.runId, e.subagent.task);
    return out;
  }

  async state(acked: Map<string, { runId: string }>): Promise<ObservedState> {
    const { store } = this.store;
    const runs = new Map<string, RunLike>();
    const children = await this.children();
    for (const runId of [...[...acked.values()].map((a) => a.runId), ...children.keys()]) {
      const r = await store.runs.get(runId);
      if (r) runs.set(r.runId, r);
    }
    const transcripts: ObservedState["transcripts"] = [];
    for (const e of await store.sessions.list({ includeArchived: true, limit: 100_000 })) {
      const key = this.keys.transcript(e.agentId, e.sessionId);
      const ids: string[] = [];
      for (const [, fields] of (await this.client.xrange(key, "-", "+")) as Array<[string, string[]]>) {
        const m = fields[fields.indexOf("m") + 1];
        if (m) ids.push((JSON.parse(m) as { id: string }).id);
      }
      transcripts.push({ name: e.key, ids });
    }
    return { runs, children, transcripts };
  }

  async close(): Promise<void> {
    await this.store.close();
    let cursor = "0";
    do {
      const [next, found] = await this.client.scan(cursor, "MATCH", `*${this.prefix}*`, "COUNT", 1000);
      if (found.length > 0) await this.client.unlink(...found);
      cursor = next;
    } while (cursor !== "0");
    this.client.disconnect();
  }
}

/** Idempotency keys the gateways logged as re-sent after an interrupted send (delivery/index.ts). */
function resentKeys(logs: string[]): Set<string> {
  const out = new Set<string>();
  for (const l of logs.join("\n").split("\n")) {
    if (!l.includes("interrupted before its mark")) continue;
    try {
      const k = (JSON.parse(l) as { idempotencyKey?: string }).idempotencyKey;
      if (k) out.add(k);
    } catch {
      // a line cut by the kill
    }
  }
  return out;
}

function check(
  state: ObservedState,
  sentPath: string,
  acked: Map<string, { runId: string; text: string; chat: string }>,
  logs: string[],
): Omit<ChaosFigures, "driver" | "kills" | "killed" | "sent"> {
  const details: string[] = [];
  const posts = existsSync(sentPath)
    ? readFileSync(sentPath, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { to: string; text: string; key?: string })
    : [];
  const chatOf = (key: string) => `chat-${CHATS.indexOf(key) + 1}`;
  // Posts per delivery idempotency key (the fake records the key of the delivery that posted)
  // and per text (every text of this run is unique: the same text under two keys is posted twice too).
  const perKey = new Map<string, number>();
  const keysOfText = new Map<string, Set<string>>();
  for (const p of posts) {
    const key = p.key ?? `text:${p.to}\u0000${p.text}`;
    perKey.set(key, (perKey.get(key) ?? 0) + 1);
    const t = `${p.to}\u0000${p.text}`;
    keysOfText.set(t, (keysOfText.get(t) ?? new Set()).add(key));
  }
  const resent = resentKeys(logs);
  let dupPosts = 0;
  let dupPostsResent = 0;
  for (const [k, n] of perKey) {
    if (n <= 1) continue;
    if (resent.has(`${k}#0`)) {
      // the README's window: the platform said yes, the process died before the mark was written
      dupPostsResent += n - 1;
      details.push(`posted ${n}×, re-sent after a crash before its mark (logged): ${k.slice(0, 100)}`);
    } else {
      dupPosts += n - 1;
      details.push(`posted ${n}× without a logged re-send: ${k.replace("\u0000", " ").slice(0, 100)}`);
    }
  }
  for (const [t, keys] of keysOfText)
    if (keys.size > 1) {
      dupPosts += keys.size - 1;
      details.push(
        `posted under ${keys.size} keys (${[...keys].join(", ")}): ${t.replace("\u0000", " ").slice(0, 80)}`,
      );
    }
  let lost = 0;
  for (const a of acked.values()) {
    const r = state.runs.get(a.runId);
    const reply = r?.reply?.trim();
    const posted = posts.some((p) => p.key === `reply:${a.runId}` && p.to === chatOf(a.chat));
    if (r?.status !== "ok" || !posted) {
      lost++;
      details.push(
        `acked "${a.text}" unanswered: ${r?.status ?? "no run record"}${reply ? ` (reply not posted: ${reply.slice(0, 60)})` : ""} (run ${a.runId})`,
      );
    }
  }
  // transcripts: ids unique per transcript; announce lines per child run
  let dupLines = 0;
  const announceCount = new Map<string, number>();
  for (const t of state.transcripts) {
    const ids = new Map<string, number>();
    for (const id of t.ids) {
      ids.set(id, (ids.get(id) ?? 0) + 1);
      if (id.startsWith("announce:"))
        announceCount.set(id.slice(9), (announceCount.get(id.slice(9)) ?? 0) + 1);
    }
    for (const [id, n] of ids)
      if (n > 1) {
        dupLines += n - 1;
        details.push(`${t.name}: line id ${id} ${n}×`);
      }
  }
  let badAnnounces = 0;
  const byTask = new Map<string, number>();
  for (const task of state.children.values()) byTask.set(task, (byTask.get(task) ?? 0) + 1);
  for (const [task, n] of byTask)
    if (n > 1) {
      badAnnounces += n - 1;
      details.push(`sub-agent "${task}" spawned ${n}× (a re-run spawned it again)`);
    }
  for (const r of state.children.keys()) {
    const n = announceCount.get(r) ?? 0;
    if (n !== 1) {
      badAnnounces++;
      const run = state.runs.get(r);
      details.push(
        `sub-agent run ${r} announced ${n}× (run ${run ? `${run.status}${run.error ? `: ${run.error}` : ""}` : "not found"})`,
      );
    }
  }
  return {
    acked: acked.size,
    lost,
    dupLines,
    dupPosts,
    dupPostsResent,
    resends: resent.size,
    spawns: state.children.size,
    badAnnounces,
    details,
  };
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  const kills = Number(process.env.CHAOS_KILLS ?? 12);
  const drivers = (process.env.CHAOS_DRIVERS ?? "local,bullmq").split(",") as ChaosDriver[];
  let bad = 0;
  for (const driver of drivers) {
    const f = await runChaos({
      driver,
      kills,
      lifeMs: driver === "bullmq" ? [1000, 3000] : [300, 1500],
      concurrency: 16,
      // bounded: the final life drains what was acked (unbounded, the local driver acks ~8,000)
      maxSent: Number(process.env.CHAOS_MAX_SENT ?? (driver === "bullmq" ? 1500 : 3000)),
      seed: Number(process.env.CHAOS_SEED ?? 7),
      log: (l) => console.error(`[${driver}] ${l}`),
    });
    const { details, ...figures } = f;
    console.log(JSON.stringify(figures));
    for (const d of details.slice(0, 20)) console.log(`  ${d}`);
    bad += f.lost + f.dupLines + f.dupPosts + f.badAnnounces;
  }
  process.exitCode = bad === 0 ? 0 : 1;
}
