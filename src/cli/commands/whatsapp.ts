import path from "node:path";
import type { Command } from "commander";
import { authStatesOf, logoutWhatsApp } from "../../app/index.js";
import { silentLogger } from "../../log.js";
import { RedisConnections } from "../../redis/connections.js";
import { type CliContext, configOpt, loadReadOnly } from "../context.js";

/**
 * `switchboard whatsapp logout [account]`: forgets the saved WhatsApp login (auth dir files;
 * with storage.driver "redis" also the keys under the store prefix), so the next start shows
 * a new QR code to relink. Run it with the gateways stopped: a running socket saves its
 * credentials again.
 */
export function registerWhatsApp(program: Command, { io, setCode }: CliContext): void {
  const wa = program.command("whatsapp").description("WhatsApp linked-device login");
  wa.command("logout [account]")
    .description(
      "forget the saved WhatsApp login (all accounts, or the one named); relink by QR on next start",
    )
    .addOption(configOpt())
    .action(async (account: string | undefined, opts: { config?: string }) => {
      const loaded = loadReadOnly(opts.config);
      const { config } = loaded;
      const known = Object.keys(config.channels.whatsapp?.accounts ?? {});
      if (account !== undefined && !known.includes(account)) {
        io.err(
          `account: no WhatsApp account "${account}" in channels.whatsapp.accounts (known: ${known.join(", ") || "none"})`,
        );
        return setCode(2);
      }
      const redis = new RedisConnections(silentLogger());
      try {
        const stateDir = path.resolve(loaded.baseDir, config.stateDir);
        const cleared = await logoutWhatsApp(
          config,
          silentLogger(),
          { stateDir, baseDir: loaded.baseDir },
          await authStatesOf(config, { redis }),
          account,
        );
        const where = config.storage.driver === "redis" ? " (auth dir and Redis)" : "";
        for (const id of cleared)
          io.out(`whatsapp ${id}: logged out${where}; the next start shows a QR code to relink`);
        if (cleared.length === 0) io.out("no WhatsApp accounts configured");
      } finally {
        await redis.close();
      }
    });
}
