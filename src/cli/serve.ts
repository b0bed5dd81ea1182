import { createApp } from "../app/index.js";
import { envLogLevel } from "../config/load.js";
import { createLogger } from "../log.js";
import { type Io, load, numberFlag } from "./context.js";

/** `start` and `worker`: run until SIGINT/SIGTERM, then stop cleanly (API.md §2). */

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

export async function runServer(
  role: "gateway" | "worker",
  opts: { config?: string; port?: string; host?: string },
  io: Io,
): Promise<number> {
  const loaded = load(opts.config);
  const logger = createLogger({ level: envLogLevel() ?? loaded.config.logLevel });
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
