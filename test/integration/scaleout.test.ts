import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { eventually, REDIS_URL, randomPrefix, rpcOverHttp, tempDir } from "../helpers.js";
import { describeRedis, newRedisClient, unlinkMatching } from "../redis.js";

/**
 * Scale-out through the real CLI: two `switchboard start` and three `switchboard worker` processes on
 * one Redis (redis store + bullmq queue). Bursts to several sessions keep each session's order.
 */

const BIN = path.resolve(import.meta.dirname, "../../bin/switchboard.js");
const children: ChildProcess[] = [];
const prefix = randomPrefix("scale");

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  const r = newRedisClient();
  await unlinkMatching(r, `*${prefix}*`);
  await r.quit();
});

function launch(args: string[], cwd: string): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd,
    env: { ...process.env, SWITCHBOARD_CONFIG: "" },
  });
  children.push(child);
  let out = "";
  child.stdout?.on("data", (d) => (out += d));
  child.stderr?.on("data", (d) => (out += d));
  return { child, output: () => out };
}

/** Set once the test knows its state dir: the gateway's generated token lives there. */
let stateDir = "";
function rpc(url: string, method: string, params: Record<string, unknown>) {
  return rpcOverHttp(url, { stateDir }, method, params);
}

describeRedis("scale-out on Redis", () => {
  it("two gateways and three workers share the work and keep per-session order", {
    timeout: 120_000,
  }, async () => {
    const t = tempDir();
    stateDir = path.join(t.dir, "state");
    const cfg = path.join(t.dir, "switchboard.json5");
    writeFileSync(
      cfg,
      JSON.stringify({
        stateDir: path.join(t.dir, "state"),
        storage: { driver: "redis", redisUrl: REDIS_URL, prefix },
        queue: {
          driver: "bullmq",
          redisUrl: REDIS_URL,
          prefix,
          concurrency: 4,
          mode: "followup",
          lockDurationMs: 2000,
          stalledIntervalMs: 2000,
        },
        models: {
          default: "s/echo",
          providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "re:$1", delayMs: 5 }] } },
        },
      }),
    );
    const gw = launch(["start", "--config", cfg, "--port", "0"], t.dir);
    const url = await eventually(
      () => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(gw.output())?.[1],
      1000,
      30,
    );
    expect(gw.output()).toContain("queue: bullmq");
    const workers = [launch(["worker", "--config", cfg], t.dir), launch(["worker", "--config", cfg], t.dir)];
    for (const w of workers) await eventually(() => w.output().includes("worker running"), 1000, 30);

    const sessions = ["agent:main:s1", "agent:main:s2", "agent:main:s3"];
    const runs: string[] = [];
    for (let i = 0; i < 10; i++) {
      for (const s of sessions) {
        const r = await rpc(url, "chat.send", {
          sessionKey: s,
          message: `${s.slice(-2)}-${i}`,
          timeoutSeconds: 0,
        });
        expect(r.ok).toBe(true);
        runs.push(r.result.runId);
      }
    }
    for (const id of runs) {
      const w = await rpc(url, "agent.wait", { runId: id, timeoutMs: 30_000 });
      expect(w.result.status).toBe("ok");
    }
    for (const s of sessions) {
      const h = await rpc(url, "sessions.history", { sessionKey: s, limit: 100 });
      const texts = h.result.messages.map((m: { role: string; content: string }) => `${m.role}:${m.content}`);
      const tag = s.slice(-2);
      expect(texts).toEqual(
        Array.from({ length: 10 }, (_, i) => [`user:${tag}-${i}`, `assistant:re:${tag}-${i}`]).flat(),
      );
    }
    const health = await rpc(url, "health", {});
    expect(health.result).toMatchObject({ storage: "redis", queue: "bullmq", redis: "ready" });

    const exits = [gw, ...workers].map(
      (p) => new Promise<number | null>((r) => p.child.on("exit", (code) => r(code))),
    );
    for (const p of [gw, ...workers]) p.child.kill("SIGTERM");
    expect(await Promise.all(exits)).toEqual([0, 0, 0]);
    t.cleanup();
  });

  it("start fails clearly when Redis is unreachable, naming the URL", { timeout: 30_000 }, async () => {
    const t = tempDir();
    const cfg = path.join(t.dir, "switchboard.json5");
    writeFileSync(
      cfg,
      JSON.stringify({
        storage: { driver: "redis", redisUrl: "redis://127.0.0.1:1" },
        queue: { driver: "bullmq", redisUrl: "redis://127.0.0.1:1" },
      }),
    );
    const p = launch(["start", "--config", cfg, "--port", "0"], t.dir);
    const code = await new Promise<number | null>((r) => p.child.on("exit", (c) => r(c)));
    expect(code).not.toBe(0);
    expect(p.output()).toContain("redis://127.0.0.1:1");
    t.cleanup();
  });
});
