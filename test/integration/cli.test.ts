import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { tempDir } from "../helpers.js";

/** The built CLI as a child process (npm test builds first). */

const BIN = path.resolve(import.meta.dirname, "../../bin/switchboard.js");

function run(
  args: string[],
  cwd: string,
  timeoutMs = 15_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, SWITCHBOARD_CONFIG: "" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`timed out: ${args.join(" ")}\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
});

describe("switchboard CLI", () => {
  it("start with a broken config exits non-zero naming the path", async () => {
    const t = tempDir();
    writeFileSync(path.join(t.dir, "bad.json5"), "{ session: { agentToAgent: { maxPingPongTurns: 42 } } }");
    const r = await run(["start", "--config", "bad.json5"], t.dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("session.agentToAgent.maxPingPongTurns");
    t.cleanup();
  });

  it("--help explains the commands and flags", async () => {
    const t = tempDir();
    const r = await run(["start", "--help"], t.dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("--port");
    expect(r.stdout).toContain("--config");
    const top = await run(["--help"], t.dir);
    for (const c of ["start", "worker", "sessions", "send", "runs", "doctor"])
      expect(top.stdout).toContain(c);
    t.cleanup();
  });

  it("start logs where it listens, serves RPC for the CLI, and stops cleanly on SIGTERM", {
    timeout: 60_000,
  }, async () => {
    const t = tempDir();
    const child = spawn(process.execPath, [BIN, "start", "--port", "0"], {
      cwd: t.dir,
      env: { ...process.env, SWITCHBOARD_CONFIG: "" },
    });
    children.push(child);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listen line:\n${out}`)), 15_000);
      child.stdout.on("data", () => {
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m?.[1]) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
    });
    expect(out).toContain("storage: fs");
    expect(out).toContain("queue: local");
    expect(out).toContain("scripted");

    const sent = await run(["send", "main", "hello cli", "--url", url], t.dir);
    expect(sent.code).toBe(0);
    expect(sent.stdout).toContain("hello cli");
    const list = await run(["sessions", "list", "--json", "--url", url], t.dir);
    expect(JSON.parse(list.stdout).sessions[0].key).toBe("agent:main:main");
    const hist = await run(["sessions", "history", "main", "--url", url], t.dir);
    expect(hist.stdout).toContain("user: hello cli");
    // Without --url the CLI finds the gateway (random port) and its generated token in the state dir.
    expect(out).toContain('"tokenFile":');
    expect(out).toContain("gateway.token");
    const auto = await run(["send", "main", "found you"], t.dir);
    expect(auto.code).toBe(0);
    expect(auto.stdout).toContain("found you");

    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(out).toContain("stopped cleanly");

    // With the gateway gone, read commands fall back to the local store (API.md §2).
    const offline = await run(["sessions", "history", "main", "--url", url], t.dir);
    expect(offline.code).toBe(0);
    expect(offline.stderr).toContain("reading the local store");
    expect(offline.stdout).toContain("user: hello cli");
    const offlineList = await run(["sessions", "list", "--json", "--url", url], t.dir);
    expect(JSON.parse(offlineList.stdout).sessions[0].key).toBe("agent:main:main");
    t.cleanup();
  }); // seven node processes one after another: slow on a loaded 2-core machine

  it("commands that need a gateway fail clearly when none runs", async () => {
    const t = tempDir();
    const r = await run(["send", "main", "hi", "--url", "http://127.0.0.1:9"], t.dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("cannot reach the gateway");
    t.cleanup();
  });

  it("a read falls back to the store only when no gateway owns it", async () => {
    const t = tempDir();
    // A gateway on this state dir, reached at a wrong URL: the store is locked, so the read is refused clearly.
    const child = spawn(process.execPath, [BIN, "start", "--port", "0"], {
      cwd: t.dir,
      env: { ...process.env, SWITCHBOARD_CONFIG: "" },
    });
    children.push(child);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listen line:\n${out}`)), 15_000);
      child.stdout.on("data", () => {
        if (out.includes("listening on")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const r = await run(["sessions", "list", "--url", "http://127.0.0.1:9"], t.dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("cannot reach the gateway");
    expect(r.stderr).toContain("in use by another Switchboard process");
    child.kill("SIGTERM");
    await new Promise((resolve) => child.on("exit", resolve));
    t.cleanup();
  });
});
