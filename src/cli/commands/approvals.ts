import type { Command } from "commander";
import { type CliContext, clientFor, configOpt, jsonOpt, tokenOpt, urlOpt } from "../context.js";

/**
 * `switchboard approvals list [--session KEY]`, `approvals approve ID [--always]`,
 * `approvals deny ID` (API.md §8.3): the operator's answer to tool calls waiting for approval,
 * through the running gateway (a decision resumes a run, so it needs one).
 */

interface Listed {
  approvals: Array<{
    id: string;
    sessionKey: string;
    runId: string;
    tool: string;
    args: unknown;
    requestedAt: number;
    expiresAt: number;
  }>;
  always: Array<{ agentId: string; tool: string; decidedBy: string; at: number }>;
}

export function registerApprovals(program: Command, { io }: CliContext): void {
  const approvals = program.command("approvals").description("tool calls waiting for an approver");
  const withOpts = (c: Command) => {
    for (const o of [urlOpt(), tokenOpt(), configOpt(), jsonOpt()]) c.addOption(o);
    return c;
  };
  withOpts(
    approvals
      .command("list")
      .description("pending approval requests, and the tools allowed always")
      .option("--session <key>", "only this session's requests"),
  ).action(async (opts) => {
    const res = await clientFor(opts).call<Listed>(
      "approvals.list",
      opts.session ? { sessionKey: opts.session } : {},
    );
    if (opts.json) return io.out(JSON.stringify(res, null, 2));
    if (res.approvals.length === 0) io.out("no pending approvals");
    for (const a of res.approvals)
      io.out(
        `${a.id}  ${a.tool}  ${JSON.stringify(a.args).slice(0, 120)}  session ${a.sessionKey}  expires ${new Date(a.expiresAt).toISOString()}`,
      );
    for (const r of res.always) io.out(`always    ${r.agentId} ${r.tool}  (by ${r.decidedBy})`);
  });
  withOpts(
    approvals
      .command("approve <id>")
      .description("let the call run (once; --always: this agent may call this tool from now on)")
      .option("--always", "allow this tool for this agent from now on"),
  ).action(async (id: string, opts) => {
    const decision = opts.always ? "allow-always" : "allow-once";
    const res = await clientFor(opts).call<{ ok: true }>("approvals.resolve", { id, decision });
    if (opts.json) return io.out(JSON.stringify(res, null, 2));
    io.out(`${decision === "allow-always" ? "allowed always" : "allowed once"}: ${id}`);
  });
  withOpts(approvals.command("deny <id>").description("refuse the call (the model is told)")).action(
    async (id: string, opts) => {
      const res = await clientFor(opts).call<{ ok: true }>("approvals.resolve", { id, decision: "deny" });
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      io.out(`denied: ${id}`);
    },
  );
}
