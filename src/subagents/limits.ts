import type { AgentConfig, Config } from "../config/schema.js";
import type { ToolCaller } from "../sessions/caller.js";
import { activeChildren } from "./children.js";
import { forbidden, type SpawnArgs, type SpawnCtx, type SpawnResult } from "./types.js";

/**
 * What a session may spawn: the `subagents` settings of an agent (depth, children cap, run
 * timeout, archive delay), the agents it may spawn under, and the sandbox rule. `sessions_spawn`
 * checks them before anything is created (plan.ts).
 */

export interface SubagentSettings {
  maxSpawnDepth: number;
  maxChildren: number;
  runTimeoutSeconds: number;
  archiveAfterMinutes: number;
}

/** `agents.list[agentId].subagents.*` over `agents.defaults.subagents.*`. */
export function subagentSettings(config: Config, agentId: string): SubagentSettings {
  const d = config.agents.defaults.subagents;
  const a = config.agents.list.find((x) => x.id === agentId)?.subagents;
  return {
    maxSpawnDepth: a?.maxSpawnDepth ?? d.maxSpawnDepth,
    maxChildren: a?.maxChildren ?? d.maxChildren,
    runTimeoutSeconds: a?.runTimeoutSeconds ?? d.runTimeoutSeconds,
    archiveAfterMinutes: a?.archiveAfterMinutes ?? d.archiveAfterMinutes,
  };
}

function agentCfg(config: Config, id: string): AgentConfig | undefined {
  return config.agents.list.find((a) => a.id === id);
}

/** Agent ids the caller may spawn under: its own, plus its allow-list (`*` = every configured agent). */
export function spawnableAgentIds(config: Config, callerAgentId: string): string[] {
  const configured = config.agents.list.map((a) => a.id);
  const allow = (agentCfg(config, callerAgentId)?.subagents?.allowAgents ?? []).map((s) =>
    s.trim().toLowerCase(),
  );
  const others = allow.includes("*") ? configured : allow.filter((id) => configured.includes(id));
  return [callerAgentId, ...[...new Set(others)].filter((id) => id !== callerAgentId).sort()];
}

export function isSandboxedAgent(config: Config, agentId: string): boolean {
  return (agentCfg(config, agentId)?.sandbox?.mode ?? config.agents.defaults.sandbox.mode) === "all";
}

/** Runtime, depth, the children cap and the agent allow-list; null when all pass. */
export async function refusedByLimits(
  args: SpawnArgs,
  ctx: Pick<SpawnCtx, "services" | "caller">,
  targetAgent: string,
): Promise<SpawnResult | null> {
  const { services, caller } = ctx;
  const cfg = services.config;
  const settings = subagentSettings(cfg, caller.agentId);
  if (args.runtime === "acp") {
    if ((args.attachments ?? []).length > 0) {
      return {
        status: "error",
        code: "attachments_unsupported_runtime",
        error: 'attachments: not supported with runtime "acp"; use runtime "subagent" (the default)',
      };
    }
    return {
      status: "error",
      code: "unsupported_runtime",
      error: 'runtime: "acp" (an external agent harness) is not supported; supported: "subagent"',
    };
  }
  if (caller.depth >= settings.maxSpawnDepth) {
    return forbidden(
      `sessions_spawn is not allowed at this depth (current depth ${caller.depth}, max ${settings.maxSpawnDepth}); raise agents.defaults.subagents.maxSpawnDepth to allow nesting`,
    );
  }
  const active = await activeChildren(services, caller.sessionKey);
  if (active.length >= settings.maxChildren) {
    return forbidden(
      `this session already has ${active.length} unfinished sub-agent(s) (maxChildren ${settings.maxChildren}, agents.defaults.subagents.maxChildren); wait for one to finish or kill one with subagents`,
    );
  }
  const allowed = spawnableAgentIds(cfg, caller.agentId);
  if (!allowed.includes(targetAgent)) {
    const configured = cfg.agents.list.some((a) => a.id === targetAgent);
    return forbidden(
      `agentId "${targetAgent}" is not allowed for sessions_spawn${configured ? "" : " (it is not a configured agent)"}; allowed: ${allowed.join(", ")} (agents.list[${caller.agentId}].subagents.allowAgents)`,
    );
  }
  return null;
}

/** `sandbox: "require"` and a sandboxed caller both need a sandboxed target; null when it is fine. */
export function refusedBySandbox(
  args: SpawnArgs,
  caller: ToolCaller,
  targetAgent: string,
  targetSandboxed: boolean,
): SpawnResult | null {
  if (args.sandbox === "require" && !targetSandboxed)
    return forbidden(
      `sandbox: "require" but agent ${targetAgent} is not sandboxed (agents.list[${targetAgent}].sandbox.mode)`,
    );
  if (caller.sandboxed && !targetSandboxed)
    return forbidden(
      `a sandboxed session cannot spawn an unsandboxed sub-agent (agent ${targetAgent} has sandbox.mode "off")`,
    );
  return null;
}
