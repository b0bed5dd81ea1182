import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pidGone, tempDir } from "../helpers.js";

/**
 * The gateway stops when told, however it was started (issue 14, item 1). `npm start` runs the
 * script through `sh -c`, which does not pass signals on; these tests start it exactly that way
 * and signal the npm process itself.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const children: ChildProcess[] = [];
const pids: number[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
});

const gone = (pid: number) => pidGone(pid);

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", (code) => resolve(code)),
  );
}

/**
 * Starts `npm start -- …` with a config whose state dir is a temp dir; resolves once it listens.
 * `group`: npm leads a process group of its own (as a terminal's foreground job does), so the
 * group can be signalled the way Ctrl-C signals it.
 */
async function npmStart(
  group = false,
): Promise<{ npm: ChildProcess; url: string; stateDir: string; gatewayPid: number; out: () => string }> {
  const t = tempDir();
  const stateDir = path.join(t.dir, "state");
  const config = path.join(t.dir, "switchboard.json5");
  writeFileSync(config, JSON.stringify({ stateDir }));
  // --ignore-scripts skips only the `prestart` build (npm test has built dist/ already); the
  // start script itself runs exactly as `npm start` runs it, through npm and `sh -c`.
  const npm = spawn(
    "npm",
    [
      "start",
      "--ignore-scripts",
      "--",
      "--port",
      "0",
      "--log-format",
      "json",
      "--heartbeat",
      path.join(t.dir, "heartbeat"),
    ],
    {
      cwd: ROOT,
      env: { ...process.env, SWITCHBOARD_CONFIG: config },
      stdio: ["ignore", "pipe", "pipe"],
      detached: group,
    },
  );
  children.push(npm);
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start did not listen:\n${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    npm.stdout?.on("data", onData);
    npm.stderr?.on("data", onData);
    npm.once("exit", (code) => reject(new Error(`npm start exited (${code}):\n${out}`)));
  });
  const gatewayPid = Number(readFileSync(path.join(stateDir, "gateway.lock"), "utf8").trim());
  pids.push(gatewayPid);
  expect(existsSync(path.join(t.dir, "heartbeat"))).toBe(true);
  expect(gatewayPid).not.toBe(npm.pid);
  return { npm, url, stateDir, gatewayPid, out: () => out };
}

async function portClosed(url: string): Promise<boolean> {
  try {
    await fetch(new URL("/healthz", url), { signal: AbortSignal.timeout(2000) });
    return false;
  } catch {
    return true;
  }
}

describe("stopping the gateway", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "%s to `npm start` stops the gateway: the port closes, no process is left, the lock is released",
    async (signal) => {
      const { npm, url, stateDir, gatewayPid } = await npmStart();
      expect((await fetch(new URL("/healthz", url))).ok).toBe(true);
      npm.kill(signal);
      await exited(npm);
      expect(await gone(gatewayPid)).toBe(true);
      expect(await portClosed(url)).toBe(true);
      expect(existsSync(path.join(stateDir, "gateway.lock"))).toBe(false);
    },
    60_000,
  );

  // Ctrl-C on a terminal signals the whole foreground group: node gets SIGINT from the terminal and
  // again from npm, which passes it on. The copy must not count as a second Ctrl-C (forced exit),
  // nor land while no listener is installed (node's default action: dead on the spot, lock left).
  // Three rounds: the copy's timing varies, and before the fix it killed the gateway in most.
  it("Ctrl-C (SIGINT to npm's whole process group) stops the gateway cleanly", async () => {
    for (let round = 0; round < 3; round++) {
      const { npm, url, stateDir, gatewayPid, out } = await npmStart(true);
      expect((await fetch(new URL("/healthz", url))).ok).toBe(true);
      process.kill(-npm.pid!, "SIGINT");
      await exited(npm);
      expect(await gone(gatewayPid)).toBe(true);
      expect(await portClosed(url)).toBe(true);
      expect(existsSync(path.join(stateDir, "gateway.lock"))).toBe(false);
      expect(out()).toContain("stopped cleanly");
      expect(out()).not.toContain("stop did not finish");
    }
  }, 90_000);

  it("the gateway stops by itself when the npm process that started it is killed outright", async () => {
    const { npm, url, stateDir, gatewayPid } = await npmStart();
    npm.kill("SIGKILL");
    await exited(npm);
    expect(await gone(gatewayPid)).toBe(true);
    expect(await portClosed(url)).toBe(true);
    expect(existsSync(path.join(stateDir, "gateway.lock"))).toBe(false);
  }, 60_000);
});
