/** Shared test utilities (one file re-exports what tests share). */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { RunStore } from "../src/store/types.js";

export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** A fresh temp dir, removed by the returned cleanup. */
export function tempDir(prefix = "sb-test-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A built module's path as a JS string literal (quoted, escaped), to paste into the source of a
 * script run in a fresh node (`npm test` builds dist/ first).
 */
export function distModule(rel: string): string {
  return JSON.stringify(path.resolve(import.meta.dirname, "../dist/src", rel));
}

/**
 * Runs an ES module script in a fresh node (no NODE_OPTIONS, `nodeArgs` before it) and resolves
 * with its last stdout line parsed as JSON; rejects with its stderr when it exits otherwise than 0.
 * Not spawnSync: the test process stays free to serve what the script calls (a fake on loopback).
 */
export function runFreshNode<T>(script: string, nodeArgs: string[] = [], timeoutMs = 60_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, "--input-type=module", "-e", script], {
      env: { ...process.env, NODE_OPTIONS: "" },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: timeoutMs,
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (code !== 0) reject(new Error(`fresh node exited ${code ?? signal}: ${err}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1) ?? "null") as T);
    });
  });
}

/**
 * The opening of a `runFreshNode` script that records which modules the fresh node loads: a
 * resolve hook posts every resolved URL into the array `seen` (declared here); put it first.
 */
export const WATCH_MODULES = (() => {
  const hook = `export async function initialize({ port }) { globalThis.port = port; }
export async function resolve(s, c, next) { const r = await next(s, c); globalThis.port.postMessage(r.url); return r; }`;
  return `
    import { register } from "node:module";
    import { MessageChannel } from "node:worker_threads";
    const { port1, port2 } = new MessageChannel();
    const seen = [];
    port1.on("message", (url) => seen.push(url));
    port1.unref();
    register("data:text/javascript," + encodeURIComponent(${JSON.stringify(hook)}), { data: { port: port2 }, transferList: [port2] });`;
})();

/** Whether a process with `pid` exists (signal 0 checks without touching it). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Bounded wait (`tries` × `stepMs`) for a process we did not spawn (no exit event to await) to be
 * gone; whether it went.
 */
export async function pidGone(pid: number, tries = 100, stepMs = 100): Promise<boolean> {
  for (let i = 0; i < tries && pidAlive(pid); i++) await new Promise((r) => setTimeout(r, stepMs));
  return !pidAlive(pid);
}

/** A unique key prefix so Redis suites can share one server in parallel. */
export function randomPrefix(name = "t"): string {
  return `sbtest:${name}:${Math.random().toString(36).slice(2, 10)}`;
}

/** Poll `fn` until it returns a truthy value (event-driven waits preferred; this bounds by count, not wall time). */
export async function eventually<T>(
  fn: () => T | Promise<T>,
  tries = 200,
  stepMs = 10,
): Promise<NonNullable<T>> {
  let last: unknown;
  for (let i = 0; i < tries; i++) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, stepMs));
  }
  throw new Error(`eventually: condition not met${last ? `: ${String(last)}` : ""}`);
}

/**
 * `POST /rpc` to a gateway running on `stateDir` (another process): JSON with the bearer token that
 * gateway generated into `<stateDir>/gateway.token` (or `token` when given).
 */
export async function rpcOverHttp(
  url: string,
  auth: { stateDir: string } | { token: string },
  method: string,
  params: Record<string, unknown> = {},
): Promise<{ ok: boolean; result: any; error?: any }> {
  const token =
    "token" in auth ? auth.token : readFileSync(path.join(auth.stateDir, "gateway.token"), "utf8").trim();
  const res = await fetch(`${url}/rpc`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ method, params }),
  });
  return (await res.json()) as { ok: boolean; result: any; error?: any };
}

/**
 * A RunStore whose write of a run's final `ok` status never returns — the process "dies" there,
 * after the pipeline committed the outcome — and a promise that resolves when that write began.
 */
export function hangingOnFinalWrite(runs: RunStore): { runs: RunStore; reachedFinalWrite: Promise<void> } {
  let reached!: () => void;
  const reachedFinalWrite = new Promise<void>((r) => {
    reached = r;
  });
  return {
    reachedFinalWrite,
    runs: runsWith(runs, {
      patch: (id, patch) => {
        if (patch.status !== "ok") return runs.patch(id, patch);
        reached();
        return new Promise(() => {});
      },
    }),
  };
}

/**
 * `runs` with some methods replaced (a store that fails, hangs or loses a write on cue). The
 * optional `patchSoon`/`putSoon` are passed on only when given, so callers use `patch`/`put`.
 */
export function runsWith(runs: RunStore, replaced: Partial<RunStore>): RunStore {
  return {
    put: (run) => runs.put(run),
    get: (id) => runs.get(id),
    listBySession: (key, limit) => runs.listBySession(key, limit),
    close: () => runs.close(),
    patch: (id, patch, assumed) => runs.patch(id, patch, assumed),
    ...replaced,
  };
}

/** mulberry32: a small seeded PRNG in [0, 1), so a randomised test's failure reproduces from its seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
