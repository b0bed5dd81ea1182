import type { Command } from "commander";
import { type CliContext, configOpt, jsonOpt, readCall, tokenOpt, urlOpt } from "../context.js";

/**
 * `switchboard pairing list [CHANNEL]`, `pairing approve CHANNEL CODE`, `pairing deny CHANNEL CODE`
 * (API.md §7): the owner's answer to DM pairing requests. Through the running gateway, or the local
 * store when none runs (the fs store's lock keeps that safe).
 */

interface Listed {
  requests: Array<{
    channel: string;
    accountId: string;
    senderId: string;
    code: string;
    createdAt: number;
    senderName?: string;
  }>;
  approved: Array<{ channel: string; accountId: string; senderId: string; approvedAt: number }>;
}

export function registerPairing(program: Command, { io }: CliContext): void {
  const pairing = program
    .command("pairing")
    .description("approve or deny DM pairing requests (dmPolicy: pairing)");
  const withOpts = (c: Command) => {
    for (const o of [urlOpt(), tokenOpt(), configOpt()]) c.addOption(o);
    return c;
  };
  withOpts(
    pairing
      .command("list [channel]")
      .description("pending pairing requests (codes expire after 1 hour) and approved senders")
      .addOption(jsonOpt()),
  ).action(async (channel: string | undefined, opts) => {
    const res = await readCall<Listed>(opts, "pairing.list", channel ? { channel } : {}, io);
    if (opts.json) return io.out(JSON.stringify(res, null, 2));
    if (res.requests.length === 0) io.out("no pending pairing requests");
    for (const r of res.requests)
      io.out(
        `pending   ${r.channel.padEnd(9)} ${r.code}  sender ${r.senderId}${r.senderName ? ` (${r.senderName})` : ""}  account ${r.accountId}  since ${new Date(r.createdAt).toISOString()}`,
      );
    for (const a of res.approved)
      io.out(
        `approved  ${a.channel.padEnd(9)} sender ${a.senderId}  account ${a.accountId}  at ${new Date(a.approvedAt).toISOString()}`,
      );
  });
  for (const verb of ["approve", "deny"] as const) {
    withOpts(
      pairing
        .command(`${verb} <channel> <code>`)
        .description(
          verb === "approve"
            ? "let the sender with this code message the assistant"
            : "drop this pairing request",
        )
        .addOption(jsonOpt()),
    ).action(async (channel: string, code: string, opts) => {
      const res = await readCall<{ ok: true; senderId: string }>(
        opts,
        `pairing.${verb}`,
        { channel, code },
        io,
      );
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      io.out(
        verb === "approve"
          ? `approved ${channel} sender ${res.senderId}`
          : `denied ${channel} sender ${res.senderId}`,
      );
    });
  }
}
