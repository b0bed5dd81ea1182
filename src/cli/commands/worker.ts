import type { Command } from "commander";
import { type CliContext, configOpt } from "../context.js";
import { runServer } from "../serve.js";

export function registerWorker(program: Command, { io, setCode }: CliContext): void {
  program
    .command("worker")
    .description("run pipeline workers only (bullmq queue driver): no channels, no RPC")
    .addOption(configOpt())
    .option("--heartbeat <file>", "touch FILE every 5 s while running (container health checks)")
    .option("--metrics-port <port>", "serve this worker's GET /metrics (Prometheus) on PORT")
    .option("--metrics-host <host>", "address the metrics port binds (default gateway.host)")
    .option("--log-format <format>", "text (a banner and short lines; the default on a terminal) or json")
    .action(async (opts) => setCode(await runServer("worker", opts, io)));
}
