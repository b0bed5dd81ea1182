/**
 * The benches' child processes: a free loopback port, the built gateway (or another script)
 * started as it is deployed (bench/deployed.ts), its health wait and stop, and its CPU and RSS
 * read from /proc (Linux).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DEPLOYED_ENV, DEPLOYED_NODE_FLAGS } from "./deployed.js";

/** The repository (the benches run from dist/bench/). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** A loopback TCP port free a moment ago. */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** Flags from a space-separated env value (`BENCH_…_NODE_FLAGS`), none when unset. */
export function envFlags(value: string | undefined): string[] {
  return (value ?? "").split(" ").filter(Boolean);
}

export interface SpawnDeployedOptions {
  /** Receives the first 50 stderr chunks (shown when a bench fails). */
  stderr: string[];
  /** Inherit stdout (the gateway's log) instead of dropping it. */
  stdout?: boolean;
  /** Node flags after the deployed ones. */
  nodeFlags?: string[];
  /** A command the node runs under (`valgrind --tool=callgrind …`), none by default. */
  wrap?: string[];
}

/**
 * `node <deployed flags> <nodeFlags> <args>` in the repository with the deployed env and logs at
 * `warn`: `args` is `["bin/switchboard.js", "start", …]` for the gateway, or a script and its
 * arguments.
 */
export function spawnDeployed(args: string[], opts: SpawnDeployedOptions): ChildProcess {
  const wrap = opts.wrap ?? [];
  const argv = [process.execPath, ...DEPLOYED_NODE_FLAGS, ...(opts.nodeFlags ?? []), ...args];
  const proc = spawn(
    wrap[0] ?? process.execPath,
    [...wrap.slice(1), ...argv].slice(wrap.length > 0 ? 0 : 1),
    {
      cwd: ROOT,
      env: { ...process.env, ...DEPLOYED_ENV, LOG_LEVEL: "warn", SWITCHBOARD_LOG_LEVEL: "warn" },
      stdio: ["ignore", opts.stdout ? "inherit" : "ignore", "pipe"],
    },
  );
  proc.stderr?.on("data", (d: Buffer) => {
    if (opts.stderr.length < 50) opts.stderr.push(d.toString());
  });
  return proc;
}

/** Polls `GET <url>/healthz` every 50 ms until it answers 2xx; throws if `proc` exits or `ms` pass. */
export async function waitHealthy(url: string, proc: ChildProcess, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (proc.exitCode !== null) throw new Error(`gateway exited with ${proc.exitCode}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("gateway did not become healthy");
}

/** SIGTERM, then SIGKILL if it has not exited after 10 s; resolves once it exited. */
export async function stopProc(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const done = new Promise<void>((r) => proc.once("exit", () => r()));
  proc.kill("SIGTERM");
  const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  await done;
  clearTimeout(t);
}

/** Every thread's time on CPU in ns (schedstat), by `<pid>/<tid>`; a thread that ended meanwhile is left out. */
export function threadNs(pids: () => number[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const p of pids())
    for (const t of readdirSync(`/proc/${p}/task`)) {
      try {
        m.set(`${p}/${t}`, Number(readFileSync(`/proc/${p}/task/${t}/schedstat`, "utf8").split(" ")[0]));
      } catch {
        // the thread ended meanwhile
      }
    }
  return m;
}

/** `pid`'s time on CPU in ns, every thread (schedstat) summed. */
export function cpuNs(pid: number): number {
  let s = 0;
  for (const ns of threadNs(() => [pid]).values()) s += ns;
  return s;
}

/** `pid`'s resident set (VmRSS) in MB. */
export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}
