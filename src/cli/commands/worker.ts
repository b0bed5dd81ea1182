import type { Command } from "commander";
import { type CliContext, configOpt } from "../context.js";
import { runServer } from "../serve.js";

export function registerWorker(program: Command, { io, setCode }: CliContext): void {
  program
    .command("worker")
    .description("run pipeline workers only (bullmq queue driver): no channels, no RPC")
    .addOption(configOpt())
    .option("--heartbeat <file>", "touch FILE every 5 s while running (container health checks)")
    .option("--log-format <format>", "text (a banner and short lines; the default on a terminal) or json")
    .action(async (opts) => setCode(await runServer("worker", opts, io)));
}
