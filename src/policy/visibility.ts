/**
 * Who may see which session (SEMANTICS.md §2). Pure: callers supply the target's lineage
 * (`spawnedByChain`) from the store. Applied by sessions_list (row by row), sessions_history,
 * sessions_send and session_status; a denial names the setting that would allow it.
 */

export type Visibility = "self" | "tree" | "agent" | "all";

/** Narrowest first: each level sees everything the previous one does. */
const ORDER: readonly Visibility[] = ["self", "tree", "agent", "all"];

export interface AgentToAgentPolicy {
  enabled: boolean;
  /** Patterns; empty = every agent. */
  allow: readonly string[];
}

export function narrowerVisibility(a: Visibility, b: Visibility): Visibility {
  return ORDER.indexOf(a) <= ORDER.indexOf(b) ? a : b;
}

/**
 * Sandbox clamp: a sandboxed session with `sessionToolsVisibility: "spawned"` gets the narrower of
 * the configured visibility and `tree` (never wider: `self` stays `self`).
 */
export function effectiveVisibility(input: {
  configured: Visibility;
  sandboxed: boolean;
  sessionToolsVisibility: "spawned" | "all";
}): Visibility {
  if (input.sandboxed && input.sessionToolsVisibility === "spawned") {
    return narrowerVisibility(input.configured, "tree");
  }
  return input.configured;
}

/** `*` globs match case-insensitively; plain entries match exactly; an empty pattern matches nothing. */
export function matchAgentGlob(pattern: string, id: string): boolean {
  const p = pattern.trim();
  if (p === "") return false;
  if (!p.includes("*")) return p === id;
  const re = new RegExp(`^${p.split("*").map(escapeRegExp).join(".*")}$`, "i");
  return re.test(id);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Both agents must match the allow list (empty = all); the same agent is always allowed. */
export function agentToAgentAllowed(a: string, b: string, policy: AgentToAgentPolicy): boolean {
  if (a === b) return true;
  if (!policy.enabled) return false;
  if (policy.allow.length === 0) return true;
  const matches = (id: string) => policy.allow.some((p) => matchAgentGlob(p, id));
  return matches(a) && matches(b);
}

export type VisibilityDecision = { ok: true } | { ok: false; reason: string; setting: string };

export interface CanSeeInput {
  /** The effective visibility (after the sandbox clamp). */
  visibility: Visibility;
  /** The configured visibility, when the sandbox clamp narrowed it: denials then name the sandbox setting. */
  configured?: Visibility;
  caller: { key: string; agentId: string };
  /** `spawnedByChain`: the target's ancestors, nearest first (its spawnedBy, that one's spawnedBy, …). */
  target: { key: string; agentId: string; spawnedByChain: readonly string[] };
  agentToAgent: AgentToAgentPolicy;
}

const norm = (s: string) => s.trim().toLowerCase();

export function canSee(input: CanSeeInput): VisibilityDecision {
  const decision = decide(input.visibility, input);
  if (decision.ok || input.configured === undefined || input.configured === input.visibility) return decision;
  // The sandbox clamp is the first blocker; say so, and what else would still block.
  const unclamped = decide(input.configured, input);
  return {
    ok: false,
    setting: "agents.defaults.sandbox.sessionToolsVisibility",
    reason:
      `sandboxed sessions only see the sessions they spawned (visibility clamped to "${input.visibility}"); ` +
      `set agents.defaults.sandbox.sessionToolsVisibility to "all" to use tools.sessions.visibility="${input.configured}"` +
      (unclamped.ok ? "" : `; even then: ${unclamped.reason}`),
  };
}

function decide(visibility: Visibility, input: CanSeeInput): VisibilityDecision {
  const callerKey = norm(input.caller.key);
  const targetKey = norm(input.target.key);
  if (callerKey === targetKey) return { ok: true };
  const callerAgent = norm(input.caller.agentId);
  const targetAgent = norm(input.target.agentId);
  // Ownership first: a session the caller spawned (transitively) is in its tree, even under another agent.
  const spawnedByCaller = input.target.spawnedByChain.some((k) => norm(k) === callerKey);
  const sameAgent = callerAgent === targetAgent;

  switch (visibility) {
    case "self":
      return deny(
        "tools.sessions.visibility",
        `visibility is "self": only the caller's own session is visible; set tools.sessions.visibility to "${spawnedByCaller ? "tree" : sameAgent ? "agent" : "all"}" to allow it`,
      );
    case "tree":
      if (spawnedByCaller) return { ok: true };
      return deny(
        "tools.sessions.visibility",
        `visibility is "tree": only the caller and the sessions it spawned are visible; set tools.sessions.visibility to "${sameAgent ? "agent" : "all"}" to allow it`,
      );
    case "agent":
      if (spawnedByCaller || sameAgent) return { ok: true };
      return deny(
        "tools.sessions.visibility",
        `visibility is "agent": sessions of agent "${targetAgent}" are not visible to agent "${callerAgent}"; set tools.sessions.visibility to "all" and enable tools.agentToAgent to allow it`,
      );
    case "all":
      if (spawnedByCaller || sameAgent) return { ok: true };
      if (!input.agentToAgent.enabled) {
        return deny(
          "tools.agentToAgent.enabled",
          `cross-agent access from "${callerAgent}" to "${targetAgent}" is disabled; set tools.agentToAgent.enabled to true to allow it`,
        );
      }
      if (!agentToAgentAllowed(callerAgent, targetAgent, input.agentToAgent)) {
        return deny(
          "tools.agentToAgent.allow",
          `agents "${callerAgent}" and "${targetAgent}" must both match tools.agentToAgent.allow (${JSON.stringify(input.agentToAgent.allow)})`,
        );
      }
      return { ok: true };
  }
}

function deny(setting: string, reason: string): VisibilityDecision {
  return { ok: false, setting, reason };
}
