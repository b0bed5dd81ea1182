import type { Command } from "commander";
import { packageVersion } from "../../app/index.js";
import { type CliContext, clientFor, configOpt, tokenOpt, urlOpt } from "../context.js";

export function registerMcp(program: Command, _ctx: CliContext): void {
  program
    .command("mcp")
    .description("serve the session tools over MCP (stdio), acting as one session of the running gateway")
    .option("--session <key>", "session the tools act as", "main")
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (opts) => {
      const { serveMcp } = await import("../../mcp/server.js");
      await serveMcp(clientFor(opts), String(opts.session), packageVersion());
      // Stays up until stdin closes.
      await new Promise<void>((resolve) => process.stdin.once("close", () => resolve()));
    });
}
