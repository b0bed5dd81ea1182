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
  messaging: ["sessions_list", "sessions_history", "sessions_send", "session_status"],
  coding: SESSION_TOOLS,
  full: SESSION_TOOLS,
};

/** Never given to a sub-agent (`cron` schedules work for a chat, which a sub-agent does not own). */
export const SUBAGENT_DENIED: readonly SessionToolName[] = [
  "sessions_send",
  "session_status",
  "agents_list",
  "cron",
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
  /** Only for messages: which `agents.list[]` entry the override came from. */
  agentId?: string;
}

function matchTool(pattern: string, tool: string): boolean {
  const p = pattern.trim().toLowerCase();
  if (p === "") return false;
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
 * null when `tool` is in the session's set; otherwise why not, naming the setting that would allow it.
 * The first blocking layer is reported (sub-agent layers before the general ones).
 */
export function explainDenied(tool: string, input: ToolSetInput): string | null {
  const known = input.knownTools ?? SESSION_TOOLS;
  if (!known.includes(tool)) return `unknown tool "${tool}"`;
  const agentPath = `agents.list[${input.agentId ?? "<agent>"}].tools`;
  const sub = input.subagent;

  if (sub) {
    if ((SUBAGENT_DENIED as readonly string[]).includes(tool)) {
      return `${tool} is never available to sub-agent sessions; call it from the requester session instead`;
    }
    if (sub.depth >= sub.maxSpawnDepth && (LEAF_DENIED as readonly string[]).includes(tool)) {
      return `${tool} is not available to a leaf sub-agent (depth ${sub.depth} ≥ maxSpawnDepth ${sub.maxSpawnDepth}); raise agents.defaults.subagents.maxSpawnDepth above ${sub.depth} to allow it`;
    }
    if (anyMatch(sub.deny, tool)) return `${tool} is denied for sub-agents by tools.subagents.tools.deny`;
    if (sub.allow.length > 0 && !anyMatch(sub.allow, tool)) {
      return `${tool} is not in tools.subagents.tools.allow; add it there to allow it for sub-agents`;
    }
  }

  const override = input.agentOverride;
  if (anyMatch(override?.deny, tool)) return `${tool} is denied by ${agentPath}.deny`;
  if (anyMatch(input.deny, tool)) return `${tool} is denied by tools.deny`;

  const profile = override?.profile ?? input.profile;
  const inProfile = (TOOL_PROFILES[profile] as readonly string[]).includes(tool);
  if (inProfile || anyMatch(input.alsoAllow, tool) || anyMatch(override?.alsoAllow, tool)) return null;
  const profileSetting = override?.profile !== undefined ? `${agentPath}.profile` : "tools.profile";
  return `${tool} is not in the "${profile}" tool profile (${profileSetting}); add it to tools.alsoAllow or choose a profile that includes it`;
}
