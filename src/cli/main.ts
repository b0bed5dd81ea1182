import { Command, CommanderError, Option } from "commander";
import { createApp, packageVersion } from "../app/index.js";
import { envLogLevel, type LoadedConfig, loadConfig } from "../config/load.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import { RpcClient } from "../gateway/client.js";
import { createLogger } from "../log.js";

/**
 * `switchboard` command line (API.md §2). `main` returns the exit code; `start`/`worker` resolve
 * only after a clean stop on SIGINT/SIGTERM.
 */

interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
}

const defaultIo: Io = {
  out: (s) => process.stdout.write(s.endsWith("\n") ? s : `${s}\n`),
  err: (s) => process.stderr.write(s.endsWith("\n") ? s : `${s}\n`),
};

function load(file: string | undefined): LoadedConfig {
  return loadConfig(file ? { file } : {});
}

function clientFor(opts: { url?: string; config?: string; token?: string }): RpcClient {
  let url = opts.url;
  let token = opts.token;
  if (!url || !token) {
    try {
      const { config } = load(opts.config);
      url ??=
        config.gateway.url ??
        `http://${config.gateway.host.includes(":") ? `[${config.gateway.host}]` : config.gateway.host}:${config.gateway.port}`;
      token ??= config.gateway.auth.token;
    } catch (err) {
      if (!url) throw err;
    }
  }
  return new RpcClient(url ?? "http://127.0.0.1:18790", token);
}

/**
 * Read commands go to the running gateway; when none answers they read the local store directly
 * (API.md §2). That is safe: the fs store's lock refuses while a gateway owns the state dir.
 */
async function readCall<T>(
  opts: { url?: string; config?: string; token?: string },
  method: string,
  params: Record<string, unknown>,
  io: Io,
): Promise<T> {
  try {
    return await clientFor(opts).call<T>(method, params);
  } catch (err) {
    if (!(err instanceof SwitchboardError) || !/cannot reach the gateway/.test(err.message)) throw err;
    const loaded = load(opts.config);
    const { readLocal } = await import("../app/local-read.js");
    return readLocal<T>(loaded, method, params, {
      unreachable: err.message,
      onLocal: () => io.err("switchboard: no gateway answered; reading the local store"),
    });
  }
}

function waitForSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: string) => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      resolve(sig);
    };
    const onInt = () => on("SIGINT");
    const onTerm = () => on("SIGTERM");
    process.once("SIGINT", onInt);
    process.once("SIGTERM", onTerm);
  });
}

async function runServer(
  role: "gateway" | "worker",
  opts: { config?: string; port?: string; host?: string },
  io: Io,
): Promise<number> {
  const loaded = load(opts.config);
  const logger = createLogger({ level: envLogLevel() ?? loaded.config.logLevel });
  const port = opts.port !== undefined ? Number(opts.port) : undefined;
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
    throw new SwitchboardError(
      "INVALID_PARAMS",
      `--port: must be an integer between 0 and 65535 (got ${opts.port})`,
    );
  }
  const app = await createApp(loaded, {
    logger,
    role,
    ...(opts.host ? { host: opts.host } : {}),
    ...(port !== undefined ? { port } : {}),
  });
  await app.start();
  const { services } = app;
  const model = services.models.demo
    ? "scripted/demo (scripted demo model: no model configured, see README)"
    : services.models.modelFor(services.config.agents.list[0]?.id ?? "main");
  const storage =
    services.store.name === "fs" ? `fs at ${services.stateDir}` : `redis ${services.config.storage.redisUrl}`;
  const where = app.address
    ? `listening on http://${app.address.host}:${app.address.port}`
    : "worker running (no RPC)";
  logger.info(
    {
      address: app.address,
      storage: services.store.name,
      queue: services.pipeline.driver,
      model,
      config: loaded.source,
    },
    `Switchboard ${role} ${where} — storage: ${storage}, queue: ${services.pipeline.driver}, model: ${model}`,
  );
  const sig = await waitForSignal();
  logger.info({ signal: sig }, "stopping");
  await app.stop();
  logger.info("stopped cleanly");
  void io;
  return 0;
}

export function buildProgram(io: Io = defaultIo, setCode: (n: number) => void = () => {}): Command {
  const program = new Command("switchboard")
    .description(
      "Self-hosted gateway connecting AI agents to chat apps, with durable sessions and session tools.",
    )
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .showHelpAfterError();

  const configOpt = () =>
    new Option(
      "-c, --config <file>",
      "config file (JSON5); default $SWITCHBOARD_CONFIG, then ./switchboard.json5",
    );
  const urlOpt = () =>
    new Option("--url <url>", "gateway URL; default from config gateway.url or http://host:port");
  const tokenOpt = () =>
    new Option("--token <token>", "bearer token; default from config gateway.auth.token");

  program
    .command("start")
    .description("run the gateway: channels, pipeline workers, RPC and web chat")
    .addOption(configOpt())
    .option("-p, --port <n>", "port to listen on (overrides gateway.port; 0 = any free port)")
    .option(
      "--host <host>",
      "address to bind (overrides gateway.host; non-loopback requires gateway.auth.token)",
    )
    .action(async (opts) => setCode(await runServer("gateway", opts, io)));

  program
    .command("worker")
    .description("run pipeline workers only (bullmq queue driver): no channels, no RPC")
    .addOption(configOpt())
    .action(async (opts) => setCode(await runServer("worker", opts, io)));

  const sessions = program.command("sessions").description("inspect sessions through the running gateway");
  sessions
    .command("list")
    .description("list sessions, newest first")
    .option("--kinds <kinds>", "comma-separated kinds: main,group,cron,hook,node,other")
    .option("--limit <n>", "at most N rows (1..200, default 50)")
    .option("--active <minutes>", "only sessions updated within this many minutes")
    .option("--json", "print machine-readable JSON")
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (opts) => {
      const params: Record<string, unknown> = {};
      if (opts.kinds)
        params.kinds = String(opts.kinds)
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
      if (opts.limit) params.limit = Number(opts.limit);
      if (opts.active) params.activeMinutes = Number(opts.active);
      const res = await readCall<{ sessions: Array<Record<string, unknown>> }>(
        opts,
        "sessions.list",
        params,
        io,
      );
      if (opts.json) io.out(JSON.stringify(res, null, 2));
      else if (res.sessions.length === 0) io.out("no sessions");
      else
        for (const s of res.sessions) {
          io.out(
            `${new Date(Number(s.updatedAt)).toISOString()}  ${String(s.kind).padEnd(5)}  ${String(s.channel).padEnd(9)}  ${s.key}${s.label ? `  [${s.label}]` : ""}`,
          );
        }
    });
  sessions
    .command("history <key>")
    .description("print one session's transcript (sanitised view)")
    .option("--limit <n>", "last N messages (default 50, max 500)")
    .option("--tools", "include tool calls and results")
    .option("--json", "print machine-readable JSON")
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (key: string, opts) => {
      const params: Record<string, unknown> = { sessionKey: key };
      if (opts.limit) params.limit = Number(opts.limit);
      if (opts.tools) params.includeTools = true;
      const res = await readCall<{
        messages: Array<{ role: string; content: unknown; timestamp: number }>;
      }>(opts, "sessions.history", params, io);
      if (opts.json) io.out(JSON.stringify(res, null, 2));
      else
        for (const m of res.messages) {
          const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
          io.out(`[${new Date(m.timestamp).toISOString()}] ${m.role}: ${text}`);
        }
    });

  program
    .command("send <key> <message>")
    .description("send a message into a session as the operator and print the reply")
    .option("--timeout <seconds>", "wait this long for the reply (0 = do not wait; default 60)")
    .option("--deliver", "also deliver the reply to the session's chat")
    .option("--json", "print machine-readable JSON")
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (key: string, message: string, opts) => {
      const res = await clientFor(opts).call<{
        status: string;
        reply?: string;
        error?: string;
        runId: string;
      }>("chat.send", {
        sessionKey: key,
        message,
        timeoutSeconds: opts.timeout !== undefined ? Number(opts.timeout) : 60,
        ...(opts.deliver ? { deliver: true } : {}),
      });
      if (opts.json) io.out(JSON.stringify(res, null, 2));
      else if (res.status === "ok") io.out(res.reply ?? "");
      else if (res.status === "accepted") io.out(`accepted: run ${res.runId}`);
      else {
        io.err(`${res.status}: ${res.error ?? ""} (run ${res.runId})`);
        setCode(1);
      }
    });

  program
    .command("runs")
    .description("inspect runs")
    .command("wait <runId>")
    .description("wait for a run to finish and print its outcome")
    .option("--timeout <seconds>", "how long to wait (default 30)")
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (runId: string, opts) => {
      const res = await clientFor(opts).call<{ status: string }>("agent.wait", {
        runId,
        timeoutMs: Math.round(Number(opts.timeout ?? 30) * 1000),
      });
      io.out(JSON.stringify(res, null, 2));
      if (res.status !== "ok") setCode(res.status === "running" ? 2 : 1);
    });

  program
    .command("health")
    .description(
      "show the running gateway's health: storage, queue, Redis, each channel (and a WhatsApp QR code to scan)",
    )
    .option("--json", "print machine-readable JSON")
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (opts) => {
      const h = await clientFor(opts).call<{
        version: string;
        storage: string;
        queue: string;
        redis?: string;
        model: string;
        channels: Record<string, string>;
        channelDetails?: Record<string, { state: string; detail: string }>;
      }>("health");
      if (opts.json) {
        io.out(JSON.stringify(h, null, 2));
        return;
      }
      io.out(
        `switchboard ${h.version}: storage ${h.storage}, queue ${h.queue}${h.redis && h.redis !== "n/a" ? `, redis ${h.redis}` : ""}, model ${h.model}`,
      );
      for (const [name, state] of Object.entries(h.channels)) {
        io.out(`  ${name}: ${state}`);
        const d = h.channelDetails?.[name];
        if (d) io.out(`    ${d.detail.split("\n").join("\n    ")}`);
      }
    });

  program
    .command("doctor")
    .description("check config, state dir permissions, Redis, channel credentials and model reachability")
    .addOption(configOpt())
    .option("--json", "print machine-readable JSON")
    .action(async (opts) => setCode(await (await import("./doctor.js")).runDoctor(opts, io)));

  program
    .command("mcp")
    .description("serve the session tools over MCP (stdio), acting as one session of the running gateway")
    .option("--session <key>", "session the tools act as (default: main)", "main")
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (opts) => {
      const { serveMcp } = await import("../mcp/server.js");
      await serveMcp(clientFor(opts), String(opts.session), packageVersion());
      // Stays up until stdin closes.
      await new Promise<void>((resolve) => process.stdin.once("close", () => resolve()));
    });

  return program;
}

export async function main(argv: string[], io: Io = defaultIo): Promise<number> {
  let code = 0;
  const program = buildProgram(io, (n) => {
    code = n;
  });
  try {
    await program.parseAsync(argv, { from: "user" });
    return code;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    io.err(`switchboard: ${errorMessage(err)}`);
    return 1;
  }
}
