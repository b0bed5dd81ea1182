import type { Command } from "commander";
import { type CliContext, clientFor, configOpt, jsonOpt, numberFlag, tokenOpt, urlOpt } from "../context.js";

interface WaitResult {
  runId: string;
  status: "ok" | "error" | "timeout" | "aborted" | "running";
  reply?: string;
  error?: string;
}

export function registerRuns(program: Command, { io, setCode }: CliContext): void {
  program
    .command("runs")
    .description("inspect runs")
    .command("wait <runId>")
    .description("wait for a run to finish and print its reply (exit 0 ok, 1 failed, 2 still running)")
    .option("--timeout <seconds>", "how long to wait (default 30)")
    .addOption(jsonOpt())
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (runId: string, opts) => {
      const seconds =
        opts.timeout !== undefined ? numberFlag("--timeout", opts.timeout, { min: 0, max: 3600 }) : 30;
      const res = await clientFor(opts).call<WaitResult>("agent.wait", {
        runId,
        timeoutMs: Math.round(seconds * 1000),
      });
      if (res.status !== "ok") setCode(res.status === "running" || res.status === "timeout" ? 2 : 1);
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      if (res.status === "ok") io.out(res.reply ?? "");
      else if (res.status === "running" || res.status === "timeout")
        io.err(`run ${runId} is still running after ${seconds} s; try again with a longer --timeout`);
      else io.err(`run ${runId} ${res.status}${res.error ? `: ${res.error}` : ""}`);
    });
}
