import type { Config } from "../config/schema.js";

/**
 * Which session tools a session may use (API.md §3 `tools.*`, SEMANTICS.md §3 "Child tools").
 * Pure: the runtime resolves the set once per turn, and `tools.invoke` answers FORBIDDEN with
 * `explainDenied` for anything outside it.
 *
 * Layers, in order:
 *   1. profile (`agents.list[].tools.profile` replaces `tools.profile`);
 *   2. + alsoAllow (global and per-agent), − deny (global and per-agent; deny wins);
 *   3. sub-agents: − sessions_send, session_status, agents_list, cron; a leaf (depth ≥ maxSpawnDepth)
 *      also − sessions_list, sessions_history, sessions_spawn, subagents, sessions_yield;
 *   4. sub-agents: `tools.subagents.tools` — a non-empty allow list restricts, deny removes.
 * Entries may be exact names or `*` globs (`sessions_*`); names that are not known tools are ignored.
 */

export const SESSION_TOOLS = [
  "sessions_list",
  "sessions_history",
  "sessions_send",
  "sessions_spawn",
  "sessions_yield",
  "subagents",
  "session_status",
  "agents_list",
  "cron",
  "message",
] as const;

export type SessionToolName = (typeof SESSION_TOOLS)[number];
export type ToolProfile = "minimal" | "messaging" | "coding" | "full";

/**
 * `minimal` keeps only session_status: a session can report on itself but not reach others.
 * `coding` and `full` are identical for session tools (they differ only for non-session tools); both
 * include `cron` (an agent may schedule reminders for its own chat), `messaging` does not.
 */
export const TOOL_PROFILES: Readonly<Record<ToolProfile, readonly SessionToolName[]>> = {
  minimal: ["session_status"],
  messaging: ["sessions_list", "sessions_history", "sessions_send", "session_status", "message"],
  coding: SESSION_TOOLS,
  full: SESSION_TOOLS,
};

/** Never given to a sub-agent (`cron` schedules work for a chat, which a sub-agent does not own). */
export const SUBAGENT_DENIED: readonly SessionToolName[] = [
  "sessions_send",
  "session_status",
  "agents_list",
  "cron",
  // Posts into a chat: a sub-agent's files reach the chat through its announce instead.
  "message",
];
/**
 * Also removed for a leaf sub-agent (depth ≥ maxSpawnDepth): it cannot look around or spawn, and
 * it has no children to wait for (sessions_yield). A default leaf has no session tools.
 */
export const LEAF_DENIED: readonly SessionToolName[] = [
  "sessions_list",
  "sessions_history",
  "sessions_spawn",
  "subagents",
  "sessions_yield",
];

export interface ToolSetInput {
  profile: ToolProfile;
  alsoAllow: readonly string[];
  deny: readonly string[];
  /** `agents.list[].tools`: profile replaces, alsoAllow/deny add to the global lists. */
  agentOverride?: { profile?: ToolProfile; alsoAllow?: readonly string[]; deny?: readonly string[] };
  /** Set for sub-agent sessions: depth is the session's spawnDepth; allow/deny are `tools.subagents.tools`. */
  subagent?: { depth: number; maxSpawnDepth: number; allow: readonly string[]; deny: readonly string[] };
  /** Tool universe (default SESSION_TOOLS). */
  knownTools?: readonly string[];
  /**
   * The agent's MCP tools (`<server>__<tool>`, API.md §8.3): they join whatever profile the agent
   * has; deny lists and the sub-agent layers apply to them as to any tool.
   */
  mcpTools?: readonly string[];
  /** Only for messages: which `agents.list[]` entry the override came from. */
  agentId?: string;
}

function matchTool(pattern: string, name: string): boolean {
  const p = pattern.trim().toLowerCase();
  if (p === "") return false;
  // MCP tools may have capitals (`files__ReadFile`); patterns match them case-blind too
  const tool = name.toLowerCase();
  if (!p.includes("*")) return p === tool;
  const re = new RegExp(
    `^${p
      .split("*")
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
  );
  return re.test(tool);
}

const anyMatch = (patterns: readonly string[] | undefined, tool: string) =>
  (patterns ?? []).some((p) => matchTool(p, tool));

export function resolveToolSet(input: ToolSetInput): Set<string> {
  const out = new Set<string>();
  for (const tool of input.knownTools ?? SESSION_TOOLS) {
    if (explainDenied(tool, input) === null) out.add(tool);
  }
  return out;
}

/**
 * The layer that removed a tool (`/tools`, RPC `tools.list`): `profile` (not in the tool profile
 * and not in tools.alsoAllow), `deny` (tools.deny), `agent` (agents.list[].tools profile or deny),
 * `subagent` (never for sub-agents, or tools.subagents.tools), `depth` (a leaf sub-agent).
 */
export type ToolRemovalLayer = "profile" | "deny" | "agent" | "subagent" | "depth";

export interface ToolRemoval {
  by: ToolRemovalLayer;
  /** Why, naming the setting that would allow it. */
  reason: string;
}

/** null when `tool` is in the session's set; otherwise why not (see explainRemoval). */
export function explainDenied(tool: string, input: ToolSetInput): string | null {
  const known = input.knownTools ?? SESSION_TOOLS;
  if (!known.includes(tool)) return `unknown tool "${tool}"`;
  return explainRemoval(tool, input)?.reason ?? null;
}

/**
 * null when the known `tool` is in the session's set; otherwise the first blocking layer (sub-agent
 * layers before the general ones) and a reason naming the setting that would allow it.
 */
export function explainRemoval(tool: string, input: ToolSetInput): ToolRemoval | null {
  const agentPath = `agents.list[${input.agentId ?? "<agent>"}].tools`;
  const sub = input.subagent;
  const removed = (by: ToolRemovalLayer, reason: string): ToolRemoval => ({ by, reason });

  if (sub) {
    if ((SUBAGENT_DENIED as readonly string[]).includes(tool)) {
      return removed(
        "subagent",
        `${tool} is never available to sub-agent sessions; call it from the requester session instead`,
      );
    }
    if (sub.depth >= sub.maxSpawnDepth && (LEAF_DENIED as readonly string[]).includes(tool)) {
      return removed(
        "depth",
        `${tool} is not available to a leaf sub-agent (depth ${sub.depth} ≥ maxSpawnDepth ${sub.maxSpawnDepth}); raise agents.defaults.subagents.maxSpawnDepth above ${sub.depth} to allow it`,
      );
    }
    if (anyMatch(sub.deny, tool))
      return removed("subagent", `${tool} is denied for sub-agents by tools.subagents.tools.deny`);
    if (sub.allow.length > 0 && !anyMatch(sub.allow, tool)) {
      return removed(
        "subagent",
        `${tool} is not in tools.subagents.tools.allow; add it there to allow it for sub-agents`,
      );
    }
  }

  const override = input.agentOverride;
  if (anyMatch(override?.deny, tool)) return removed("agent", `${tool} is denied by ${agentPath}.deny`);
  if (anyMatch(input.deny, tool)) return removed("deny", `${tool} is denied by tools.deny`);

  const profile = override?.profile ?? input.profile;
  const inProfile =
    (TOOL_PROFILES[profile] as readonly string[]).includes(tool) || (input.mcpTools?.includes(tool) ?? false);
  if (inProfile || anyMatch(input.alsoAllow, tool) || anyMatch(override?.alsoAllow, tool)) return null;
  const byAgent = override?.profile !== undefined;
  return removed(
    byAgent ? "agent" : "profile",
    `${tool} is not in the "${profile}" tool profile (${byAgent ? `${agentPath}.profile` : "tools.profile"}); add it to tools.alsoAllow or choose a profile that includes it`,
  );
}

/** Every known tool, split into the session's set and what was removed by which layer. */
export function toolReport(input: ToolSetInput): {
  allowed: string[];
  removed: Array<{ name: string } & ToolRemoval>;
} {
  const allowed: string[] = [];
  const removed: Array<{ name: string } & ToolRemoval> = [];
  for (const name of input.knownTools ?? SESSION_TOOLS) {
    const r = explainRemoval(name, input);
    if (r) removed.push({ name, ...r });
    else allowed.push(name);
  }
  return { allowed, removed };
}

/** The policy input of a session (tools.*, its agent's override, its depth), from the config. */
export function toolPolicyInput(
  config: Config,
  caller: { agentId: string; depth: number },
  knownTools?: readonly string[],
  mcpTools?: readonly string[],
): ToolSetInput {
  const agent = config.agents.list.find((a) => a.id === caller.agentId);
  const maxSpawnDepth = agent?.subagents?.maxSpawnDepth ?? config.agents.defaults.subagents.maxSpawnDepth;
  return {
    profile: config.tools.profile,
    alsoAllow: config.tools.alsoAllow,
    deny: config.tools.deny,
    agentId: caller.agentId,
    ...(agent?.tools ? { agentOverride: agent.tools } : {}),
    ...(caller.depth > 0
      ? {
          subagent: {
            depth: caller.depth,
            maxSpawnDepth,
            allow: config.tools.subagents.tools.allow,
            deny: config.tools.subagents.tools.deny,
          },
        }
      : {}),
    ...(knownTools ? { knownTools } : {}),
    ...(mcpTools && mcpTools.length > 0 ? { mcpTools } : {}),
  };
}
