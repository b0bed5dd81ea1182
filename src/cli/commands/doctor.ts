import type { Command } from "commander";
import { type CliContext, configOpt, jsonOpt } from "../context.js";

export function registerDoctor(program: Command, { io, setCode }: CliContext): void {
  program
    .command("doctor")
    .description("check config, state dir permissions, Redis, channel credentials and model reachability")
    .addOption(configOpt())
    .addOption(jsonOpt())
    .action(async (opts) => setCode(await (await import("../doctor.js")).runDoctor(opts, io)));
}
