import { z } from "zod";
import type { Services } from "../services/index.js";
import { AGENT_ID_RE, normalizeKey } from "../sessions/keys.js";
import { defineTool } from "./types.js";

/**
 * `agents_list` (SEMANTICS.md §3): the agents the caller may spawn sub-agents under — its own
 * agent first, then `agents.list[caller].subagents.allowAgents` (`"*"` = every configured agent),
 * sorted. An allow-listed id that is not configured is shown with `configured: false` (spawning
 * under it is refused), so a misconfiguration is visible rather than silent.
 */

export const agentsListSchema = z.strictObject({});

export interface AgentListing {
  id: string;
  name?: string;
  model?: string;
  configured: boolean;
}

export function listSpawnableAgents(
  services: Pick<Services, "config" | "models">,
  callerAgentId: string,
): { requester: string; allowAny: boolean; agents: AgentListing[] } {
  const configured = services.config.agents.list;
  const requester = normalizeKey(callerAgentId);
  const allowAgents = configured.find((a) => a.id === requester)?.subagents?.allowAgents ?? [];
  const allowAny = allowAgents.some((a) => a.trim() === "*");
  const others = new Set<string>();
  if (allowAny) for (const a of configured) others.add(a.id);
  for (const raw of allowAgents) {
    const id = normalizeKey(raw);
    if (AGENT_ID_RE.test(id)) others.add(id);
  }
  others.delete(requester);
  const describe = (id: string): AgentListing => {
    const cfg = configured.find((a) => a.id === id);
    if (!cfg) return { id, configured: false };
    return {
      id,
      ...(cfg.name !== undefined ? { name: cfg.name } : {}),
      model: services.models.modelFor(id),
      configured: true,
    };
  };
  return {
    requester,
    allowAny,
    agents: [requester, ...[...others].sort((a, b) => a.localeCompare(b))].map(describe),
  };
}

export const agentsListTool = defineTool({
  name: "agents_list",
  description:
    "List the agents you may run sub-agents under with sessions_spawn (your own agent first). " +
    "Entries with configured: false are allow-listed but not set up, so spawning under them fails.",
  schema: () => agentsListSchema,
  async execute(_args, { services, caller }) {
    return listSpawnableAgents(services, caller.agentId);
  },
});
