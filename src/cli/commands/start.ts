import type { Command } from "commander";
import { type CliContext, configOpt } from "../context.js";
import { runServer } from "../serve.js";

export function registerStart(program: Command, { io, setCode }: CliContext): void {
  program
    .command("start")
    .description("run the gateway: channels, pipeline workers, RPC and web chat")
    .addOption(configOpt())
    .option("-p, --port <n>", "port to listen on (overrides gateway.port; 0 = any free port)")
    .option(
      "--host <host>",
      "address to bind (overrides gateway.host; non-loopback requires gateway.auth.token)",
    )
    .option("--heartbeat <file>", "touch FILE every 5 s while running (container health checks)")
    .option("--log-format <format>", "text (a banner and short lines; the default on a terminal) or json")
    .action(async (opts) => setCode(await runServer("gateway", opts, io)));
}
