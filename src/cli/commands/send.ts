import type { Command } from "commander";
import { type CliContext, clientFor, configOpt, jsonOpt, numberFlag, tokenOpt, urlOpt } from "../context.js";

/** chat.send's limit (gateway/methods/chat.ts). */
const MAX_TIMEOUT_SECONDS = 3600;

export function registerSend(program: Command, { io, setCode }: CliContext): void {
  program
    .command("send <key> <message>")
    .description("send a message into a session as the operator and print the reply")
    .option("--timeout <seconds>", "wait this long for the reply (0 = do not wait; default 60)")
    .option("--deliver", "also deliver the reply to the session's chat")
    .addOption(jsonOpt())
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (key: string, message: string, opts) => {
      const timeoutSeconds =
        opts.timeout !== undefined
          ? numberFlag("--timeout", opts.timeout, { min: 0, max: MAX_TIMEOUT_SECONDS })
          : 60;
      const res = await clientFor(opts).call<{
        status: string;
        reply?: string;
        error?: string;
        runId?: string;
      }>("chat.send", {
        sessionKey: key,
        message,
        timeoutSeconds,
        ...(opts.deliver ? { deliver: true } : {}),
      });
      // The exit code says the same with and without --json: 0 ok/accepted, 2 timeout, 1 otherwise.
      if (res.status === "timeout") setCode(2);
      else if (res.status !== "ok" && res.status !== "accepted") setCode(1);
      if (opts.json) io.out(JSON.stringify(res, null, 2));
      else if (res.status === "ok") io.out(res.reply ?? "");
      else if (res.status === "accepted") io.out(`accepted: run ${res.runId}`);
      else if (res.status === "timeout")
        io.err(
          `no reply within ${timeoutSeconds} s; the run goes on. Wait for it with: switchboard runs wait ${res.runId}`,
        );
      else io.err(`${res.status}: ${stripRunHint(res.error ?? "")}${res.runId ? ` (run ${res.runId})` : ""}`);
    });
}

/** Server errors may already name the run; print the id once. */
function stripRunHint(error: string): string {
  return error.replace(/\s*\(?(?:use |call )?agent\.wait[^)]*\)?/g, "").trim();
}
