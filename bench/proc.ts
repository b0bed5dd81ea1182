/**
 * The benches' child processes: a free loopback port, the built gateway (or another script)
 * started as it is deployed (bench/deployed.ts), its health wait and stop, and its CPU and RSS
 * read from /proc (Linux).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DEPLOYED_ENV, DEPLOYED_NODE_FLAGS } from "./deployed.js";

/** The repository (the benches run from dist/bench/). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The repository, whether this file runs from bench/ (tsx, vitest) or from dist/bench/ (built). */
const REPO =
  path.basename(path.resolve(import.meta.dirname, "..")) === "dist"
    ? path.resolve(import.meta.dirname, "../..")
    : path.resolve(import.meta.dirname, "..");

/** What `npm run build` compiles (tsconfig.build.json): dist/ is fresh when it is newer than all of it. */
const BUILT_FROM = ["src", "channels", "bench", "test/fakes", "test/fixtures", "test/helpers"];

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of existsSync(dir) ? readdirSync(dir, { withFileTypes: true, recursive: true }) : []) {
    if (e.isFile() && e.name.endsWith(".ts"))
      newest = Math.max(newest, statSync(path.join(e.parentPath, e.name)).mtimeMs);
  }
  return newest;
}

let distFresh: boolean | undefined;

/**
 * The `node` arguments that run the repository's TypeScript script `rel` ("test/fixtures/x.ts"):
 * its build, `dist/<rel>.js`, when the last `npm run build` is newer than every source it compiles
 * (`npm test` builds first), else the source through tsx. A fresh build starts in about half the
 * time and CPU of tsx (a gateway fixture: ~1 s less per start on an idle 2-core machine); a stale
 * one is never run, so a test run without a build still tests the sources.
 */
export function scriptArgs(rel: string): string[] {
  const built = path.join(REPO, "dist", rel.replace(/\.ts$/, ".js"));
  const info = path.join(REPO, "dist", ".tsbuildinfo");
  distFresh ??=
    existsSync(info) && BUILT_FROM.every((d) => newestSource(path.join(REPO, d)) <= statSync(info).mtimeMs);
  return distFresh && existsSync(built) ? [built] : ["--import", "tsx", path.join(REPO, rel)];
}

const spawned = new Set<ChildProcess>();
let closed = false;

/**
 * Registers a child process of a harness so `killSpawned` can end it. A test that times out never
 * reaches the harness's own `finally`, and its gateways would outlive the run.
 */
export function tracked<C extends ChildProcess>(child: C): C {
  if (closed) child.kill("SIGKILL");
  else {
    spawned.add(child);
    child.once("exit", () => spawned.delete(child));
  }
  return child;
}

/**
 * SIGKILLs every tracked child still running, and from now on any child tracked later (the timed-out
 * test's code may still be running and start more): a test file's `afterAll`.
 */
export function killSpawned(): void {
  closed = true;
  for (const c of spawned) c.kill("SIGKILL");
  spawned.clear();
}
process.once("exit", () => {
  for (const c of spawned) c.kill("SIGKILL");
});

/**
 * Polls `done` every `stepMs` until it holds or `ms` have passed; whether it held. The bound is wall
 * time, generous: it only matters when something is broken, and a loaded machine only makes the
 * wait longer, never cut short.
 */
export async function waitUntil(
  done: () => boolean | Promise<boolean>,
  ms: number,
  stepMs = 25,
): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= until) return false;
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

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
