import type { Command } from "commander";
import { type CliContext, configOpt } from "../context.js";
import { runServer } from "../serve.js";

export function registerWorker(program: Command, { io, setCode }: CliContext): void {
  program
    .command("worker")
    .description("run pipeline workers only (bullmq queue driver): no channels, no RPC")
    .addOption(configOpt())
    .action(async (opts) => setCode(await runServer("worker", opts, io)));
}
