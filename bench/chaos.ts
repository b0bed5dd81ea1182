/**
 * Chaos run (issue 11, "nothing lost, nothing twice"): streams turns, sub-agent spawns and
 * sessions_send into a real gateway process and SIGKILLs it at random moments, restarting it
 * each time; then checks what the fake platform and the transcripts hold:
 *   lost        acked messages that never got their reply posted
 *   dupLines    transcript lines whose id appears twice in one transcript
 *   dupPosts    posts (chat + text) made twice on the fake platform
 *   spawns / badAnnounces   sub-agents, and those not announced exactly once
 * `npm run chaos` prints the figures; test/integration/chaos.test.ts runs a short version.
 * Local driver only (fs store + local queue).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export interface ChaosOptions {
  /** SIGKILLs (then restarts); a final life drains the work. */
  kills: number;
  /** How long each life is fed before its kill, at random in [min, max] ms. */
  lifeMs: [number, number];
  /** Messages in flight at once. */
  concurrency: number;
  seed?: number;
  log?: (line: string) => void;
}

export interface ChaosFigures {
  driver: "local";
  kills: number;
  sent: number;
  acked: number;
  lost: number;
  dupLines: number;
  dupPosts: number;
  spawns: number;
  badAnnounces: number;
  details: string[];
}

const FIXTURE = path.resolve(import.meta.dirname, "../test/fixtures/file-channel-gateway.ts");
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

function start(configPath: string, sentPath: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, configPath, sentPath, CHATS.join(",")], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`gateway did not start:\n${out}`));
    }, 30_000);
    const on = (d: Buffer) => {
      out += d.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: `http://127.0.0.1:${m[1]}` });
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited ${code}:\n${out}`));
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

function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((r) => {
    child.once("exit", () => r());
    child.kill("SIGKILL");
  });
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosFigures> {
  const log = opts.log ?? (() => {});
  const random = rng(opts.seed ?? 42);
  const dir = mkdtempSync(path.join(os.tmpdir(), "sb-chaos-"));
  const configPath = path.join(dir, "config.json");
  const sentPath = path.join(dir, "sent.jsonl");
  const stateDir = path.join(dir, "state");
  writeFileSync(
    configPath,
    JSON.stringify({
      stateDir,
      gateway: { port: 0, host: "127.0.0.1", auth: { token: TOKEN } },
      tools: { sessions: { visibility: "agent" } },
      // one turn per message, so each acked message has its own reply to look for
      queue: { mode: "followup" },
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
    }),
  );
  const acked = new Map<string, { runId: string; text: string; chat: string }>();
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
  try {
    for (let life = 0; life <= opts.kills; life++) {
      const g = await start(configPath, sentPath);
      const last = life === opts.kills;
      const until = Date.now() + opts.lifeMs[0] + random() * (opts.lifeMs[1] - opts.lifeMs[0]);
      let stop = false;
      const workers = Array.from({ length: last ? 0 : opts.concurrency }, async () => {
        while (!stop && Date.now() < until) {
          const m = nextMessage();
          sent++;
          try {
            const r = await rpc(g.url, "chat.send", {
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
      if (!last) {
        await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now())));
        stop = true;
        await kill(g.child);
        await Promise.allSettled(workers);
        log(`life ${life}: killed; acked so far ${acked.size} of ${sent}`);
        continue;
      }
      // final life: let everything finish
      for (const a of acked.values()) await rpc(g.url, "agent.wait", { runId: a.runId, timeoutMs: 30_000 });
      // and every sub-agent run (its announce follows its end)
      for (const r of childRunIds(stateDir)) await rpc(g.url, "agent.wait", { runId: r, timeoutMs: 30_000 });
      let quiet = 0;
      let prev = -1;
      for (let i = 0; i < 200 && quiet < 8; i++) {
        const n = existsSync(sentPath) ? readFileSync(sentPath, "utf8").length : 0;
        quiet = n === prev ? quiet + 1 : 0;
        prev = n;
        await new Promise((r) => setTimeout(r, 250));
      }
      const figures = check(stateDir, sentPath, acked, opts.kills, sent);
      await rpc(g.url, "health", {});
      g.child.kill("SIGTERM");
      await new Promise((r) => setTimeout(r, 200));
      await kill(g.child);
      return figures;
    }
    throw new Error("unreachable");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every sub-agent run named in the session index. */
function childRunIds(stateDir: string): Set<string> {
  const out = new Set<string>();
  for (const f of ["index.jsonl", "index.snapshot.jsonl"].map((n) => path.join(stateDir, "sessions", n))) {
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, "utf8").split("\n")) {
      const m = /"subagent":\{"task":"[^"]*","runId":"([^"]+)"/.exec(line);
      if (m) out.add(m[1]!);
    }
  }
  return out;
}

function check(
  stateDir: string,
  sentPath: string,
  acked: Map<string, { runId: string; text: string; chat: string }>,
  kills: number,
  sent: number,
): ChaosFigures {
  const details: string[] = [];
  const posts = existsSync(sentPath)
    ? readFileSync(sentPath, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { to: string; text: string })
    : [];
  const seen = new Map<string, number>();
  for (const p of posts) seen.set(`${p.to}\u0000${p.text}`, (seen.get(`${p.to}\u0000${p.text}`) ?? 0) + 1);
  // the runs as the RunStore holds them (journal + snapshot, last record wins)
  const runs = new Map<
    string,
    { runId: string; sessionKey: string; status: string; reply?: string; deliver?: boolean }
  >();
  for (const f of ["runs.snapshot.jsonl", "runs.jsonl"].map((n) => path.join(stateDir, "runs", n))) {
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, "utf8").split("\n")) {
      try {
        const r = JSON.parse(line) as {
          op?: string;
          run?: { runId: string; sessionKey: string; status: string };
        };
        if (r.op === "put" && r.run) runs.set(r.run.runId, r.run);
      } catch {
        // header or torn line
      }
    }
  }
  const chatOf = (key: string) => `chat-${CHATS.indexOf(key) + 1}`;
  // how often each (chat, text) may legitimately be posted: once per run that replied it
  const allowed = new Map<string, number>();
  for (const r of runs.values()) {
    if (r.status !== "ok" || !r.deliver || !r.reply || CHATS.indexOf(r.sessionKey) < 0) continue;
    const k = `${chatOf(r.sessionKey)}\u0000${r.reply.trim()}`;
    allowed.set(k, (allowed.get(k) ?? 0) + 1);
  }
  let dupPosts = 0;
  for (const [k, n] of seen) {
    const ok = Math.max(1, allowed.get(k) ?? 0);
    if (n > ok) {
      dupPosts += n - ok;
      details.push(`posted ${n}× (${ok} run(s) replied it): ${k.replace("\u0000", " ").slice(0, 100)}`);
    }
  }
  let lost = 0;
  for (const a of acked.values()) {
    const r = runs.get(a.runId);
    const reply = r?.reply?.trim();
    const posted = reply ? seen.has(`${a.chat === "" ? "" : chatOf(a.chat)}\u0000${reply}`) : false;
    if (r?.status !== "ok" || !posted) {
      lost++;
      details.push(
        `acked "${a.text}" unanswered: ${r?.status ?? "no run record"}${reply ? ` (reply not posted: ${reply.slice(0, 60)})` : ""} (run ${a.runId})`,
      );
    }
  }
  // transcripts: ids unique per file; announce lines per child run
  const sessionsDir = path.join(stateDir, "agents", "main", "sessions");
  let dupLines = 0;
  const announceCount = new Map<string, number>();
  for (const f of existsSync(sessionsDir) ? readdirSync(sessionsDir) : []) {
    if (!f.endsWith(".jsonl")) continue;
    const ids = new Map<string, number>();
    for (const line of readFileSync(path.join(sessionsDir, f), "utf8").split("\n")) {
      if (!line.trim()) continue;
      let id: string;
      try {
        id = (JSON.parse(line) as { id: string }).id;
      } catch {
        continue;
      }
      ids.set(id, (ids.get(id) ?? 0) + 1);
      if (id.startsWith("announce:"))
        announceCount.set(id.slice(9), (announceCount.get(id.slice(9)) ?? 0) + 1);
    }
    for (const [id, n] of ids)
      if (n > 1) {
        dupLines += n - 1;
        details.push(`${f}: line id ${id} ${n}×`);
      }
  }
  const childRuns = childRunIds(stateDir);
  let badAnnounces = 0;
  for (const r of childRuns) {
    const n = announceCount.get(r) ?? 0;
    if (n !== 1) {
      badAnnounces++;
      details.push(`sub-agent run ${r} announced ${n}×`);
    }
  }
  return {
    driver: "local",
    kills,
    sent,
    acked: acked.size,
    lost,
    dupLines,
    dupPosts,
    spawns: childRuns.size,
    badAnnounces,
    details,
  };
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  const kills = Number(process.env.CHAOS_KILLS ?? 12);
  const f = await runChaos({
    kills,
    lifeMs: [300, 1500],
    concurrency: 16,
    seed: Number(process.env.CHAOS_SEED ?? 7),
    log: (l) => console.error(l),
  });
  const { details, ...figures } = f;
  console.log(JSON.stringify(figures));
  for (const d of details.slice(0, 20)) console.log(`  ${d}`);
  process.exitCode = f.lost + f.dupLines + f.dupPosts + f.badAnnounces === 0 ? 0 : 1;
}
