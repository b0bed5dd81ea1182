import { describe, expect, it } from "vitest";
import { ToolRegistry } from "../../../src/agent/tool-registry.js";
import { parseConfig } from "../../../src/config/load.js";
import type { Services } from "../../../src/services/index.js";
import type { SessionEntry } from "../../../src/store/types.js";
import { allTools } from "../../../src/tools/index.js";
import type { ToolCaller } from "../../../src/tools/types.js";

/** Tool specs are built once per (config, agent, depth, sandbox) — issue 18's largest per-turn cost. */

function caller(agentId: string, depth = 0): ToolCaller {
  const key = depth > 0 ? `agent:${agentId}:subagent:x` : `agent:${agentId}:main`;
  const entry = { key, agentId, sessionId: "s", updatedAt: 0, createdAt: 0 } as unknown as SessionEntry;
  return { sessionKey: key, agentId, entry, depth, sandboxed: false };
}

function services(raw: Record<string, unknown>): Services {
  return { config: parseConfig(raw) } as unknown as Services;
}

const twoAgents = {
  agents: { list: [{ id: "main", subagents: { allowAgents: ["research"] } }, { id: "research" }] },
};

describe("ToolRegistry.specs cache", () => {
  it("answers the same frozen specs for the same config and caller, and builds them only once", () => {
    const reg = new ToolRegistry(allTools());
    const svc = services(twoAgents);
    const a = reg.specs(svc, caller("main"));
    const b = reg.specs(svc, caller("main"));
    expect(b).toBe(a);
    expect(Object.isFrozen(a)).toBe(true);
    expect(a.map((s) => s.name)).toContain("sessions_spawn");
  });

  it("keeps callers apart: another agent or depth gets its own specs (spawn lists that agent's choices)", () => {
    const reg = new ToolRegistry(allTools());
    const svc = services(twoAgents);
    const spawnAgents = (c: ToolCaller) => {
      const params = reg.specs(svc, c).find((s) => s.name === "sessions_spawn")?.parameters as
        | { properties?: { agentId?: { enum?: string[] } } }
        | undefined;
      return params?.properties?.agentId?.enum;
    };
    expect(spawnAgents(caller("main"))).toEqual(expect.arrayContaining(["main", "research"]));
    expect(spawnAgents(caller("research"))).toEqual(["research"]);
    const leaf = reg.specs(svc, caller("main", 1)).map((s) => s.name);
    expect(leaf).not.toEqual(reg.specs(svc, caller("main")).map((s) => s.name));
  });

  it("a new config object (a config change) builds fresh specs", () => {
    const reg = new ToolRegistry(allTools());
    const first = reg.specs(services(twoAgents), caller("main"));
    const denied = reg.specs(services({ ...twoAgents, tools: { deny: ["sessions_spawn"] } }), caller("main"));
    expect(denied).not.toBe(first);
    expect(denied.map((s) => s.name)).not.toContain("sessions_spawn");
  });
});
