import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scriptArgs } from "../../bench/proc.js";
import { startOpenAIFake } from "../fakes/openai.js";
import { eventually, rpcOverHttp, tempDir } from "../helpers.js";

/** SIGKILL a gateway mid-turn: after restart the run completes and the reply is delivered exactly once. */

const FIXTURE = scriptArgs("test/fixtures/file-channel-gateway.ts");
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
});

function startGateway(
  configPath: string,
  sentPath: string,
  seedKey = "agent:main:crash",
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, [...FIXTURE, configPath, sentPath, seedKey], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  children.push(child);
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${out}`)), 20_000);
    const on = (d: Buffer) => {
      out += d.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: `http://127.0.0.1:${m[1]}`, output: () => out });
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
    child.on("exit", (code) => reject(new Error(`gateway exited ${code}:\n${out}`)));
  });
}

/** Set once the test knows its state dir: the gateway's generated token lives there. */
let stateDir = "";
function rpc(url: string, method: string, params: Record<string, unknown>) {
  return rpcOverHttp(url, { stateDir }, method, params);
}

describe("crash mid-turn", () => {
  it("re-runs the turn after restart and delivers the reply exactly once", { timeout: 90_000 }, async () => {
    const fake = await startOpenAIFake();
    const t = tempDir();
    stateDir = path.join(t.dir, "state");
    const configPath = path.join(t.dir, "config.json");
    const sentPath = path.join(t.dir, "sent.jsonl");
    writeFileSync(
      configPath,
      JSON.stringify({
        stateDir: path.join(t.dir, "state"),
        gateway: { port: 0 },
        models: {
          default: "fake/m",
          providers: { fake: { kind: "openai", baseUrl: fake.url, maxRetries: 0 } },
        },
      }),
    );
    try {
      // First life: the model call hangs; the gateway dies during it.
      fake.enqueue({ delayMs: 60_000, text: "never" });
      const first = await startGateway(configPath, sentPath);
      const sent = await rpc(first.url, "chat.send", {
        sessionKey: "agent:main:crash",
        message: "prepare",
        timeoutSeconds: 0,
        deliver: true,
      });
      expect(sent.result.status).toBe("accepted");
      await fake.waitForRequests(1);
      first.child.kill("SIGKILL");
      await new Promise((r) => first.child.once("exit", r));
      expect(existsSync(sentPath)).toBe(false);

      // Second life: the journal replays the turn; the model answers now.
      const second = await startGateway(configPath, sentPath);
      const runs = await rpc(second.url, "sessions.history", { sessionKey: "agent:main:crash" });
      expect(runs.ok).toBe(true);
      await eventually(async () => fake.chatRequests().length >= 2, 500, 20);
      const hist = await eventually(
        async () => {
          const h = await rpc(second.url, "sessions.history", { sessionKey: "agent:main:crash" });
          return h.result.messages.some((m: { role: string }) => m.role === "assistant") ? h : null;
        },
        500,
        20,
      );
      const users = hist.result.messages.filter((m: { role: string }) => m.role === "user");
      expect(users).toHaveLength(1);
      expect(hist.result.messages.at(-1).content).toBe("prepare");
      const wait = await rpc(second.url, "agent.wait", { runId: sent.result.runId, timeoutMs: 10_000 });
      expect(wait.result).toMatchObject({ status: "ok", reply: "prepare" });
      const lines = await eventually(
        () => (existsSync(sentPath) ? readFileSync(sentPath, "utf8").trim().split("\n") : null),
        500,
        20,
      );
      expect(lines.map((l) => JSON.parse(l))).toEqual([
        { to: "chat-1", text: "prepare", key: `reply:${sent.result.runId}` },
      ]);
      second.child.kill("SIGTERM");
      await new Promise((r) => second.child.once("exit", r));
    } finally {
      await fake.close();
      t.cleanup();
    }
  });
});

/**
 * A crash right after the platform accepted the reply (issue 11, delivery window): the fake
 * platform records the post, then SIGKILLs the gateway. The turn re-runs after the restart.
 */
describe("crash after the platform accepted the reply", () => {
  async function crashAfterPost(when: "after" | "inside") {
    const t = tempDir();
    stateDir = path.join(t.dir, "state");
    const configPath = path.join(t.dir, "config.json");
    const sentPath = path.join(t.dir, "sent.jsonl");
    writeFileSync(
      configPath,
      JSON.stringify({
        stateDir,
        gateway: { port: 0 },
        models: {
          default: "s/echo",
          providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "re: $1" }] } },
        },
      }),
    );
    // A 1 s lease: a send interrupted before its mark is re-sent after 1 s, not 15 s.
    const env = { LEASE_MS: "1000" };
    const posts = () =>
      existsSync(sentPath)
        ? readFileSync(sentPath, "utf8")
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l) as { to: string; text: string; key?: string })
        : [];
    try {
      const first = await startGateway(configPath, sentPath, "agent:main:crash", {
        ...env,
        CRASH_AFTER_POST: "^re: once$",
        CRASH_WHEN: when,
      });
      const exited = new Promise((r) => first.child.once("exit", r));
      const sent = await rpc(first.url, "chat.send", {
        sessionKey: "agent:main:crash",
        message: "once",
        timeoutSeconds: 0,
        deliver: true,
      });
      expect(sent.result.status).toBe("accepted");
      await exited;
      expect(first.child.signalCode).toBe("SIGKILL");
      expect(posts()).toHaveLength(1);

      // Second life: the journal re-runs the turn, whose delivery meets the outbox record.
      const second = await startGateway(configPath, sentPath, "agent:main:crash", env);
      const wait = await rpc(second.url, "agent.wait", { runId: sent.result.runId, timeoutMs: 20_000 });
      expect(wait.result).toMatchObject({ status: "ok", reply: "re: once" });
      const result = { posts: posts() };
      // pino writes stdout asynchronously and the pipe is read on its own schedule: the output
      // is whole only once the child's streams have closed, not when agent.wait answers.
      const closed = new Promise((r) => second.child.once("close", r));
      second.child.kill("SIGTERM");
      await closed;
      return { ...result, output: second.output(), runId: sent.result.runId as string };
    } finally {
      t.cleanup();
    }
  }

  it("once the send returned, the mark is on disk before anything else runs: posted exactly once", {
    timeout: 60_000,
  }, async () => {
    const { posts, output, runId } = await crashAfterPost("after");
    expect(posts).toEqual([{ to: "chat-1", text: "re: once", key: `reply:${runId}` }]);
    expect(output).not.toContain("interrupted before its mark");
  });

  it("the remaining window (the platform said yes, the gateway never heard it): sent again once the lease ran out, logged with the key", {
    timeout: 60_000,
  }, async () => {
    const { posts, output, runId } = await crashAfterPost("inside");
    // at-least-once: the README's honest window posts it twice, never zero times, and says so
    expect(posts).toEqual([
      { to: "chat-1", text: "re: once", key: `reply:${runId}` },
      { to: "chat-1", text: "re: once", key: `reply:${runId}` },
    ]);
    const warn = output
      .split("\n")
      .filter((l) => l.includes("interrupted before its mark"))
      .map((l) => JSON.parse(l) as { idempotencyKey: string });
    expect(warn).toEqual([expect.objectContaining({ idempotencyKey: `reply:${runId}#0` })]);
  });
});
