import type { ApprovalsConfig } from "../config/schema.js";
import { matchAgentGlob } from "../policy/visibility.js";

/**
 * The approval policy (API.md §8.3): for one tool call, allow, ask or deny. The first rule whose
 * tool glob and argument globs all match wins; an `allow-always` stored for (agent, tool) allows
 * unless a `deny` rule matches; otherwise the default, where `auto` follows the tool's MCP
 * annotations (`readOnlyHint` → allow, any other MCP tool → ask) and lets the session tools run.
 */

export type ApprovalAction = "allow" | "ask" | "deny";

/** What the policy knows of a tool: whether it comes from an MCP server, and its read-only hint. */
export interface ToolTraits {
  mcp: boolean;
  readOnly?: boolean;
}

export interface PolicyVerdict {
  action: ApprovalAction;
  /** `rule:<i>` (tools.approvals.rules[i]), `always` (a stored allow-always) or `default`. */
  by: string;
}

/** A glob over an argument's text: `**` crosses `/`, `*` and `?` stay within one segment. */
export function argGlobMatches(pattern: string, value: string): boolean {
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "*" && pattern[i + 1] === "*") {
      re += ".*";
      i++;
    } else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`, "s").test(value);
}

function argText(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return null;
}

function ruleMatches(rule: ApprovalsConfig["rules"][number], tool: string, args: unknown): boolean {
  if (!matchAgentGlob(rule.tool, tool)) return false;
  if (!rule.args) return true;
  const obj = typeof args === "object" && args !== null ? (args as Record<string, unknown>) : {};
  for (const [name, glob] of Object.entries(rule.args)) {
    const text = argText(obj[name]);
    if (text === null || !argGlobMatches(glob, text)) return false;
  }
  return true;
}

export function approvalVerdict(
  cfg: ApprovalsConfig,
  tool: string,
  args: unknown,
  traits: ToolTraits,
  allowedAlways: boolean,
): PolicyVerdict {
  for (const [i, rule] of cfg.rules.entries()) {
    if (!ruleMatches(rule, tool, args)) continue;
    if (rule.action === "deny" || !allowedAlways) return { action: rule.action, by: `rule:${i}` };
    break;
  }
  if (allowedAlways) return { action: "allow", by: "always" };
  if (cfg.default !== "auto") return { action: cfg.default, by: "default" };
  if (!traits.mcp) return { action: "allow", by: "default" };
  return { action: traits.readOnly === true ? "allow" : "ask", by: "default" };
}
