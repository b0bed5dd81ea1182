import type { Command } from "commander";
import type { TailCacheStats } from "../../store/types.js";
import { type CliContext, clientFor, configOpt, jsonOpt, tokenOpt, urlOpt } from "../context.js";

interface Health {
  version: string;
  storage: string;
  queue: string;
  redis?: string;
  model: string;
  /** By channel name: `{ status, accounts: { <id>: { status, lease?, heldBy? } } }` (a plain state before round 3). */
  channels: Record<
    string,
    | string
    | {
        status: string;
        accounts?: Record<string, { status: string; lease?: string; heldBy?: string | null }>;
      }
  >;
  /** By `<channel>:<accountId>` (gateways before it had only `channels`, keyed that way). */
  accounts?: Record<string, string>;
  channelDetails?: Record<string, { state: string; detail: string; qr?: string }>;
  transcriptCache?: TailCacheStats;
}

/** "91 transcripts, 7.9 of 12 M chars; 1,204 reads from memory, 12 tails loaded from the store". */
function cacheLine(c: TailCacheStats): string {
  const m = (n: number) => (n / 2 ** 20).toFixed(1).replace(/\.0$/, "");
  return (
    `${c.files} transcripts, ${m(c.chars)} of ${m(c.maxChars)} M chars; ` +
    `${c.hits.toLocaleString("en")} reads from memory, ${c.fills.toLocaleString("en")} tails loaded from the store`
  );
}

/** A device-link QR drawn in the terminal (never handed to another site: it is a secret). */
async function qrScreen(qr: string): Promise<string> {
  const { renderUnicodeCompact } = await import("uqr");
  return [
    "    Link it: on the phone open WhatsApp → Settings → Linked devices → Link a device, and scan:",
    renderUnicodeCompact(qr, { border: 2 }),
    "    (the code changes every 20-60 s; run `switchboard health` again for the current one)",
  ].join("\n");
}

/** "connected", or under a lease "connected · lease held (this gateway: host:pid:ab12)" / "stopped · standby (held by …)". */
function stateLine(h: Health, name: string): string {
  const flat = h.accounts?.[name];
  const [channel = name, accountId = "default"] = name.split(":");
  const chan = h.channels[channel];
  const acc = typeof chan === "object" ? chan.accounts?.[accountId] : undefined;
  const state = flat ?? acc?.status ?? (typeof chan === "string" ? chan : (chan?.status ?? "?"));
  if (!acc?.lease) return state;
  return acc.lease === "held"
    ? `${state} · lease held here (${acc.heldBy ?? "?"})`
    : `${state} · standby (held by ${acc.heldBy ?? "nobody yet"})`;
}

export function registerHealth(program: Command, { io }: CliContext): void {
  program
    .command("health")
    .description(
      "show the running gateway's health: version, storage, queue, Redis, the transcript cache, each channel (and a WhatsApp QR code to scan)",
    )
    .addOption(jsonOpt())
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (opts) => {
      const h = await clientFor(opts).call<Health>("health");
      if (opts.json) return io.out(JSON.stringify(h, null, 2));
      io.out(`switchboard ${h.version}`);
      io.out(`  storage  ${h.storage}`);
      io.out(`  queue    ${h.queue}${h.redis && h.redis !== "n/a" ? ` (redis ${h.redis})` : ""}`);
      io.out(`  model    ${h.model}`);
      if (h.transcriptCache) io.out(`  cache    ${cacheLine(h.transcriptCache)}`);
      const states = h.accounts ?? h.channels;
      const names = Object.keys(states);
      if (names.length === 0) io.out("  channels none");
      for (const name of names) {
        io.out(`  ${name.padEnd(8)} ${stateLine(h, name)}`);
        const d = h.channelDetails?.[name];
        if (d?.qr) io.out(await qrScreen(d.qr));
        else if (d) io.out(`    ${d.detail.split("\n").join("\n    ")}`);
      }
    });
}
