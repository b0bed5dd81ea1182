import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scriptArgs } from "../../bench/proc.js";
import { approvalsConfig, APPROVAL_TARGET as TARGET, userMessages } from "../approvals-fixture.js";
import { eventually, REDIS_URL, randomPrefix, rpcOverHttp, tempDir } from "../helpers.js";

/**
 * A pending approval and its paused run survive a SIGKILL (API.md §8.3): of the gateway on the
 * embedded drivers (fs store + local queue: the journaled turn re-runs after the restart and finds
 * its approval), and of the worker on redis + bullmq (another worker takes the stalled turn). The
 * decision made after the restart resumes the run; the tool runs once and the request was posted
 * once.
 */

const FIXTURE = scriptArgs("test/fixtures/file-channel-gateway.ts");
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
});

const CHAT = "agent:main:chat";
const TOKEN = "approvals-restart-token-0123456789";

function start(
  configPath: string,
  sentPath: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...FIXTURE, configPath, sentPath, `${CHAT},${TARGET}`], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  children.push(child);
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`process did not start:\n${out}`)), 20_000);
    const on = (d: Buffer) => {
      out += d.toString();
      const m = /READY (\d+|worker)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: `http://127.0.0.1:${m[1]}` });
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
    child.on("exit", (code) => reject(new Error(`process exited ${code}:\n${out}`)));
  });
}

async function kill(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  const gone = new Promise((r) => child.once("exit", r));
  child.kill(signal);
  await gone;
}

function configFor(stateDir: string, redis: { prefix: string } | null) {
  return {
    stateDir,
    gateway: { port: 0, host: "127.0.0.1", auth: { token: TOKEN } },
    ...approvalsConfig({ approvals: { timeoutSeconds: 600 } }),
    ...(redis
      ? {
          storage: { driver: "redis", redisUrl: REDIS_URL, prefix: redis.prefix },
          queue: {
            driver: "bullmq",
            redisUrl: REDIS_URL,
            prefix: redis.prefix,
            lockDurationMs: 1000,
            stalledIntervalMs: 1000,
          },
        }
      : {}),
  };
}

async function scenario(driver: "local" | "bullmq") {
  const t = tempDir();
  const stateDir = path.join(t.dir, "state");
  const configPath = path.join(t.dir, "config.json");
  const sentPath = path.join(t.dir, "sent.jsonl");
  writeFileSync(
    configPath,
    JSON.stringify(configFor(stateDir, driver === "bullmq" ? { prefix: randomPrefix("aprst") } : null)),
  );
  const rpc = (url: string, method: string, params: Record<string, unknown>) =>
    rpcOverHttp(url, { token: TOKEN }, method, params);
  try {
    const gateway = await start(configPath, sentPath);
    const worker = driver === "bullmq" ? await start(configPath, sentPath, { ROLE: "worker" }) : null;
    const sent = await rpc(gateway.url, "chat.send", {
      sessionKey: CHAT,
      message: "ping hello",
      timeoutSeconds: 0,
    });
    const runId = sent.result.runId as string;
    const pending = await eventually(
      async () => {
        const r = await rpc(gateway.url, "approvals.list", {});
        return r.result?.approvals?.length ? r.result.approvals : null;
      },
      200,
      50,
    );
    const id = pending[0].id as string;
    await eventually(
      async () => (await rpc(gateway.url, "runs.get", { runId })).result?.status === "waiting",
      100,
      50,
    );
    // The request is posted and its outbox mark written before the kill: a kill between the two
    // would send it again after the restart (the README's window; a loaded machine widens it).
    const marked = `${sentPath}.marked`;
    await eventually(
      () => existsSync(marked) && readFileSync(marked, "utf8").includes(JSON.stringify(`approval:${id}`)),
      200,
      50,
    );

    // SIGKILL while the approval is pending: the gateway (local) or the worker running the turn (bullmq)
    let url = gateway.url;
    if (driver === "local") {
      await kill(gateway.child, "SIGKILL");
      url = (await start(configPath, sentPath)).url;
    } else {
      // the gateway takes turns too: both die, whichever ran the turn
      await kill(worker!.child, "SIGKILL");
      await kill(gateway.child, "SIGKILL");
      // both come back at once (the sessions exist since the first start)
      const [back] = await Promise.all([
        start(configPath, sentPath),
        start(configPath, sentPath, { ROLE: "worker" }),
      ]);
      url = back.url;
    }
    const after = await rpc(url, "approvals.list", {});
    expect(after.result.approvals.map((a: { id: string }) => a.id)).toEqual([id]);
    // the turn runs again and waits again for the same approval
    await eventually(
      async () => {
        const r = await rpc(url, "runs.get", { runId });
        return r.result?.status === "waiting" && r.result.waitingFor?.approvalId === id;
      },
      200,
      50,
    );
    expect((await rpc(url, "approvals.resolve", { id, decision: "allow-once" })).result).toEqual({
      ok: true,
    });
    const done = await rpc(url, "agent.wait", { runId, timeoutMs: 20_000 });
    expect(done.result.status).toBe("ok");
    expect(done.result.reply).toContain("done:");
    expect(await userMessages((method, params) => rpc(url, method, params))).toEqual(["hello"]);
    // the request was posted once, across both lives
    const lines = existsSync(sentPath)
      ? readFileSync(sentPath, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
      : [];
    expect(lines.filter((l: { key?: string }) => l.key === `approval:${id}`)).toHaveLength(1);
  } finally {
    for (const c of children.splice(0)) c.kill("SIGKILL");
    t.cleanup();
  }
}

describe("approvals across a SIGKILL", () => {
  it("fs + local: the gateway dies while the approval is pending; after the restart the decision resumes the run", {
    timeout: 60_000,
  }, async () => {
    await scenario("local");
  });
  it("redis + bullmq: the gateway and the worker die while the approval is pending; after the restart the decision resumes the run", {
    timeout: 60_000,
  }, async () => {
    await scenario("bullmq");
  });
});
