import { Command, CommanderError } from "commander";
import { packageVersion } from "../app/index.js";
import { errorMessage } from "../errors.js";
import { registerApprovals } from "./commands/approvals.js";
import { registerCron } from "./commands/cron.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerHealth } from "./commands/health.js";
import { registerMcp } from "./commands/mcp.js";
import { registerPairing } from "./commands/pairing.js";
import { registerRuns } from "./commands/runs.js";
import { registerSend } from "./commands/send.js";
import { registerSessions } from "./commands/sessions.js";
import { registerStart } from "./commands/start.js";
import { registerWhatsApp } from "./commands/whatsapp.js";
import { registerWorker } from "./commands/worker.js";
import { type CliContext, defaultIo, type Io } from "./context.js";

/**
 * `switchboard` command line (API.md §2). One file per command under `commands/`, each exporting
 * `register<Name>(program, ctx)`; add a command by adding its file and one line below.
 * `main` returns the exit code; `start`/`worker` resolve only after a clean stop on SIGINT/SIGTERM.
 */

export type { Io } from "./context.js";

const COMMANDS: Array<(program: Command, ctx: CliContext) => void> = [
  registerStart,
  registerWorker,
  registerSessions,
  registerSend,
  registerRuns,
  registerHealth,
  registerCron,
  registerPairing,
  registerApprovals,
  registerDoctor,
  registerMcp,
  registerWhatsApp,
];

export function buildProgram(io: Io = defaultIo, setCode: (n: number) => void = () => {}): Command {
  const program = new Command("switchboard")
    .description(
      "Self-hosted gateway connecting AI agents to chat apps, with durable sessions and session tools.",
    )
    .version(packageVersion(), "-V, --version", "print the version")
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .showHelpAfterError();
  for (const register of COMMANDS) register(program, { io, setCode });
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
