import { writeFileSync } from "node:fs";
import path from "node:path";
import v8 from "node:v8";
import { createApp } from "../app/index.js";
import { envLogLevel } from "../config/load.js";
import { SwitchboardError } from "../errors.js";
import { createLogger, type Logger } from "../log.js";
import { banner, textLogStream } from "./banner.js";
import { type Io, load, numberFlag } from "./context.js";

/**
 * `start` and `worker`: run until told to stop, then stop cleanly within STOP_BUDGET_MS (API.md §2).
 * "Told to stop" is SIGINT or SIGTERM, or — when an npm script started us — the npm process
 * going away, so the gateway is never left orphaned holding the state-dir lock.
 */

/** Below Docker's default 10 s grace period; the pipelines hand work back within 5 s. */
export const STOP_BUDGET_MS = 8000;
const PARENT_POLL_MS = 500;

export interface ServeOptions {
  config?: string;
  port?: string;
  host?: string;
  logFormat?: string;
  heartbeat?: string;
}

/** Touch `file` now and every HEARTBEAT_MS while running: the container health check of a worker. */
const HEARTBEAT_MS = 5000;
function startHeartbeat(file: string): () => void {
  const beat = () => writeFileSync(file, `${Date.now()}\n`);
  beat();
  const timer = setInterval(beat, HEARTBEAT_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** `initialParent`: our parent's pid when we started (null = do not watch it). */
function waitForStop(initialParent: number | null): Promise<string> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (why: string) => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      if (timer) clearInterval(timer);
      resolve(why);
    };
    const onInt = () => done("SIGINT");
    const onTerm = () => done("SIGTERM");
    process.once("SIGINT", onInt);
    process.once("SIGTERM", onTerm);
    if (initialParent !== null) {
      timer = setInterval(() => {
        if (process.ppid !== initialParent) done("parent process exited");
      }, PARENT_POLL_MS);
      timer.unref();
    }
  });
}

/** A second signal while stopping, or the budget running out, ends the process at once. */
function forceExitGuard(logger: Logger): () => void {
  const force = (why: string) => {
    logger.error(`stop did not finish (${why}); exiting now`);
    process.exit(1);
  };
  const onSignal = () => force("second signal");
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const timer = setTimeout(() => force(`over the ${STOP_BUDGET_MS / 1000} s budget`), STOP_BUDGET_MS);
  timer.unref();
  return () => {
    clearTimeout(timer);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  };
}

function logFormat(raw: string | undefined, io: Io): "text" | "json" {
  if (raw === undefined) return io.isTTY ? "text" : "json";
  if (raw === "text" || raw === "json") return raw;
  throw new SwitchboardError("INVALID_PARAMS", `--log-format: must be text or json (got ${raw})`);
}

/**
 * Once started, V8 is asked to collect the old generation when it has grown by 30% of what the
 * last full GC kept. Its own factor let a busy gateway's heap grow to about four times its live
 * set (~50 MB live, ~300 MB resident under 32 busy clients; ~165 MB at 50%, ~155 MB at 25%, at
 * about the same throughput: a full GC of a heap this size is a few ms, mostly incremental). Set after start-up rather than as a node flag, so loading a large state dir (1M
 * sessions: the heap grows to ~340 MB) does not pay for extra full GCs on the way. A
 * `--heap-growing-percent` given to node itself (NODE_OPTIONS, the command line) is left alone.
 */
export function tightenHeapGrowth(percent = 30): boolean {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)].some((a) =>
    a.startsWith("--heap-growing-percent"),
  );
  if (given) return false;
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return true;
}

export async function runServer(role: "gateway" | "worker", opts: ServeOptions, io: Io): Promise<number> {
  const parent = process.env.npm_lifecycle_event !== undefined ? process.ppid : null;
  const format = logFormat(opts.logFormat, io);
  const loaded = load(opts.config);
  const level = envLogLevel() ?? loaded.config.logLevel;
  const logger =
    format === "text"
      ? createLogger({ level, destination: textLogStream((s) => io.out(s)) })
      : createLogger({ level });
  const port =
    opts.port !== undefined
      ? numberFlag("--port", opts.port, { min: 0, max: 65535, integer: true })
      : undefined;
  const app = await createApp(loaded, {
    logger,
    role,
    ...(opts.host ? { host: opts.host } : {}),
    ...(port !== undefined ? { port } : {}),
  });
  await app.start();
  tightenHeapGrowth();
  const stopHeartbeat = opts.heartbeat ? startHeartbeat(opts.heartbeat) : () => {};
  const { services } = app;
  const model = services.models.demo
    ? "scripted/demo (the scripted demo model: no model configured, see README)"
    : services.models.modelFor(services.config.agents.list[0]?.id ?? "main");
  const storage =
    services.store.name === "fs" ? `fs at ${services.stateDir}` : `redis ${services.config.storage.redisUrl}`;
  const queue =
    services.pipeline.driver === "local"
      ? "local (in-process, journaled)"
      : `bullmq ${services.config.queue.redisUrl}`;
  const host = app.address?.host.includes(":") ? `[${app.address.host}]` : app.address?.host;
  const url = app.address ? `http://${host}:${app.address.port}` : null;
  const where = url ? `listening on ${url}` : "worker running (no RPC)";
  if (format === "text") {
    io.out(
      banner({
        version: services.version,
        role,
        url,
        webchat: role === "gateway" && services.config.channels.webchat.enabled,
        generatedToken: services.config.gateway.auth.token ? null : app.token,
        tokenConfigured: Boolean(services.config.gateway.auth.token),
        storage,
        queue,
        model,
        config: loaded.source,
      }),
    );
  } else {
    logger.info(
      {
        address: app.address,
        storage: services.store.name,
        queue: services.pipeline.driver,
        model,
        config: loaded.source,
        // The URLs to open carry the token in their #fragment: see the token file (never logged).
        ...(url && !services.config.gateway.auth.token
          ? { tokenFile: path.join(services.stateDir, "gateway.token") }
          : {}),
      },
      `Switchboard ${role} ${where} — storage: ${storage}, queue: ${services.pipeline.driver}, model: ${model}`,
    );
  }
  const why = await waitForStop(parent);
  stopHeartbeat();
  logger.info({ reason: why }, `stopping (${why})`);
  const release = forceExitGuard(logger);
  await app.stop();
  release();
  logger.info("stopped cleanly");
  return 0;
}
