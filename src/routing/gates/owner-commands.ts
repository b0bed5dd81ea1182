import { statusCard } from "../../policy/status-card.js";
import { toolPolicyInput, toolReport } from "../../policy/tool-policy.js";
import type { Services } from "../../services/index.js";
import type { SendPolicyOverride, SessionEntry } from "../../store/types.js";
import type { Middleware } from "../compose.js";
import type { RoutedCtx } from "../context.js";
import { ensureRouted } from "../ensure.js";
import { senderAllowed } from "./access.js";
import { replyToCommand } from "./command-reply.js";

/**
 * Owner commands (SEMANTICS §2): `/send on|allow`, `/send off|deny`, `/send inherit|default|reset`
 * `/status` and `/tools`, as a standalone message from a configured owner. They work even in a denied chat;
 * from anyone else they are ignored (no reply, no change, and never passed to a model).
 */

type Command =
  | { kind: "send"; value: SendPolicyOverride | null }
  | { kind: "status" }
  | { kind: "tools" }
  | { kind: "bad"; text: string };

export function parseOwnerCommand(text: string): Command | null {
  const m = /^\/(send|status|tools)(?:@\S+)?(?:\s+(\S+))?\s*$/i.exec(text.trim());
  if (!m) return null;
  if (m[1]?.toLowerCase() === "status") return m[2] ? null : { kind: "status" };
  if (m[1]?.toLowerCase() === "tools") return m[2] ? null : { kind: "tools" };
  const arg = (m[2] ?? "").toLowerCase();
  if (arg === "on" || arg === "allow") return { kind: "send", value: "allow" };
  if (arg === "off" || arg === "deny") return { kind: "send", value: "deny" };
  if (arg === "inherit" || arg === "default" || arg === "reset") return { kind: "send", value: null };
  return { kind: "bad", text: "usage: /send on|off|inherit" };
}

/**
 * The `/tools` answer: the session's effective tools (an MCP tool with its server) and which layer
 * removed each other one.
 */
export async function toolsText(
  services: Pick<Services, "config" | "toolCatalog">,
  entry: SessionEntry,
): Promise<string> {
  let allowed: string[];
  let removed: Array<{ name: string; by: string; reason: string }>;
  const byPolicy = toolReport(
    toolPolicyInput(services.config, { agentId: entry.agentId, depth: entry.spawnDepth ?? 0 }),
  );
  if (services.toolCatalog) {
    const report = await services.toolCatalog.report(entry);
    // the session tools in the policy's order (as before MCP), then each MCP tool with its server
    const rank = new Map(byPolicy.allowed.map((name, i) => [name, i]));
    const tools = [...report.tools].sort(
      (a, b) => (rank.get(a.name) ?? rank.size) - (rank.get(b.name) ?? rank.size),
    );
    allowed = tools.map((t) => (t.server ? `${t.name} (MCP server ${t.server})` : t.name));
    removed = report.removed;
  } else {
    ({ allowed, removed } = byPolicy);
  }
  const lines = [`Tools for ${entry.key}: ${allowed.length > 0 ? allowed.join(", ") : "(none)"}`];
  if (removed.length > 0) {
    lines.push("Removed:");
    for (const r of removed) lines.push(`- ${r.name} (${r.by}): ${r.reason}`);
  }
  return lines.join("\n");
}

export const ownerCommands: Middleware<RoutedCtx> = async (ctx, next) => {
  const cmd = parseOwnerCommand(ctx.msg.text);
  if (!cmd) return next();
  const { services } = ctx;
  if (
    !senderAllowed(
      ctx.policy.owners.filter((o) => o !== "*"),
      ctx.msg.channel,
      ctx.msg.senderId,
    )
  ) {
    ctx.dropped = "command-from-non-owner";
    return;
  }
  if (cmd.kind === "bad") {
    await replyToCommand(ctx, cmd.text);
  } else if (cmd.kind === "tools") {
    const entry = (await services.store.sessions.get(ctx.sessionKey)) ?? (await ensureRouted(ctx));
    await replyToCommand(ctx, await toolsText(services, entry));
  } else if (cmd.kind === "status") {
    const entry = (await services.store.sessions.get(ctx.sessionKey)) ?? (await ensureRouted(ctx));
    await replyToCommand(ctx, await statusCard(services, entry));
  } else {
    if (!ctx.entry) await ensureRouted(ctx);
    const updated = await services.store.sessions.patch(ctx.sessionKey, {
      sendPolicy: cmd.value ?? undefined,
      updatedAt: services.now(),
    });
    if (updated) services.bus.emit("session.updated", { entry: updated });
    const text =
      cmd.value === "allow"
        ? "Sending is on for this chat."
        : cmd.value === "deny"
          ? "Sending is off for this chat: the agent will not reply here until /send on or /send inherit."
          : "Sending follows the default policy for this chat again.";
    await replyToCommand(ctx, text);
  }
  ctx.dropped = "owner-command";
};
