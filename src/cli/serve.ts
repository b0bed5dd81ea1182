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
  metricsPort?: string;
  metricsHost?: string;
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

/**
 * A signal this soon after the one that started the stop is the same request delivered twice:
 * Ctrl-C signals the terminal's whole process group, so under `npm start` node gets SIGINT from
 * the terminal and again from npm, which passes it on to its script a few ms later.
 */
export const SAME_SIGNAL_MS = 1000;

/**
 * The stop request and the forced exit, on one pair of SIGINT/SIGTERM listeners kept from the
 * end of start-up until the process ends: removing a signal's last listener puts back the
 * default action (the process dies on the spot, no clean stop, the lock left behind), so the
 * listeners are never swapped. The first signal — or, with `initialParent`, our parent going
 * away — resolves `requested`; a signal more than SAME_SIGNAL_MS later, while stopping, or the
 * stop budget running out (`guard`), ends the process at once; after `done`, signals are ignored
 * while the process winds down.
 */
export function stopControl(
  initialParent: number | null,
  logger: Logger,
  exit: (code: number) => void = (code) => process.exit(code),
): { requested: Promise<string>; guard: () => void; done: () => void } {
  let firstAt = -1;
  let finished = false;
  let budget: NodeJS.Timeout | undefined;
  let poll: NodeJS.Timeout | undefined;
  let resolve: (why: string) => void = () => {};
  const requested = new Promise<string>((r) => {
    resolve = r;
  });
  const request = (why: string) => {
    if (firstAt >= 0) return;
    firstAt = performance.now();
    if (poll) clearInterval(poll);
    resolve(why);
  };
  const force = (why: string) => {
    if (finished) return;
    finished = true;
    logger.error(`stop did not finish (${why}); exiting now`);
    exit(1);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (finished) return;
    if (firstAt < 0) request(signal);
    else if (performance.now() - firstAt > SAME_SIGNAL_MS) force("second signal");
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  if (initialParent !== null) {
    poll = setInterval(() => {
      if (process.ppid !== initialParent) request("parent process exited");
    }, PARENT_POLL_MS);
    poll.unref();
  }
  return {
    requested,
    guard() {
      budget = setTimeout(() => force(`over the ${STOP_BUDGET_MS / 1000} s budget`), STOP_BUDGET_MS);
      budget.unref();
    },
    done() {
      // The listeners stay (a signal handle does not keep the process alive): a late duplicate
      // signal must not kill a process that stopped cleanly.
      finished = true;
      if (budget) clearTimeout(budget);
      if (poll) clearInterval(poll);
    },
  };
}

function logFormat(raw: string | undefined, io: Io): "text" | "json" {
  if (raw === undefined) return io.isTTY ? "text" : "json";
  if (raw === "text" || raw === "json") return raw;
  throw new SwitchboardError("INVALID_PARAMS", `--log-format: must be text or json (got ${raw})`);
}

/**
 * Once started, V8 is asked to collect the old generation when it has grown by 20% of what the
 * last full GC kept. Its own factor let a busy gateway's heap grow to about four times its live
 * set (~50 MB live, ~300 MB resident under 32 busy clients; ~165 MB at 50%, ~155 MB at 25%; at
 * 20%, 144 MB after the bench's 100,000 turns with the 12M-character tail cache, where 30% gave
 * 151, at the same 64-client throughput: a full GC of a heap this size is a few ms, mostly
 * incremental). Set after start-up rather than as a node flag, so loading a large state dir (1M
 * sessions: the heap grows to ~340 MB) does not pay for extra full GCs on the way. A
 * `--heap-growing-percent` given to node itself (NODE_OPTIONS, the command line) is left alone.
 */
export function tightenHeapGrowth(percent = 20): boolean {
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
    ...(opts.metricsPort !== undefined
      ? { metricsPort: numberFlag("--metrics-port", opts.metricsPort, { min: 0, max: 65535, integer: true }) }
      : {}),
    ...(opts.metricsHost ? { metricsHost: opts.metricsHost } : {}),
  });
  await app.start();
  if (app.metricsAddress)
    logger.info(
      { metrics: app.metricsAddress },
      `metrics on http://${app.metricsAddress.host}:${app.metricsAddress.port}/metrics`,
    );
  const control = stopControl(parent, logger);
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
  const why = await control.requested;
  stopHeartbeat();
  logger.info({ reason: why }, `stopping (${why})`);
  control.guard();
  await app.stop();
  control.done();
  logger.info("stopped cleanly");
  return 0;
}
