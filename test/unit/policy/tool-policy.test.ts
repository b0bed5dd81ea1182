import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/index.js";
import {
  explainDenied,
  resolveToolSet,
  SESSION_TOOLS,
  type ToolSetInput,
  toolPolicyInput,
  toolReport,
} from "../../../src/policy/tool-policy.js";

const base: ToolSetInput = { profile: "coding", alsoAllow: [], deny: [] };
const sub = (depth: number, maxSpawnDepth: number, allow: string[] = [], deny: string[] = []) => ({
  depth,
  maxSpawnDepth,
  allow,
  deny,
});
const sorted = (s: Set<string>) => [...s].sort();

const ALL = [...SESSION_TOOLS].sort();
const MESSAGING = ["message", "session_status", "sessions_history", "sessions_list", "sessions_send"];

describe("resolveToolSet", () => {
  it.each<[string, Partial<ToolSetInput>, string[]]>([
    // profiles
    ["minimal", { profile: "minimal" }, ["session_status"]],
    ["messaging", { profile: "messaging" }, MESSAGING],
    ["coding", { profile: "coding" }, ALL],
    ["full", { profile: "full" }, ALL],
    // alsoAllow / deny
    [
      "minimal + alsoAllow",
      { profile: "minimal", alsoAllow: ["sessions_send"] },
      ["session_status", "sessions_send"],
    ],
    [
      "alsoAllow glob",
      { profile: "minimal", alsoAllow: ["sessions_*"] },
      [
        "session_status",
        "sessions_history",
        "sessions_list",
        "sessions_send",
        "sessions_spawn",
        "sessions_yield",
      ],
    ],
    [
      "alsoAllow unknown names are ignored",
      { profile: "minimal", alsoAllow: ["exec", "rm_rf"] },
      ["session_status"],
    ],
    [
      "deny removes",
      { profile: "full", deny: ["sessions_spawn", "subagents"] },
      ALL.filter((t) => t !== "sessions_spawn" && t !== "subagents"),
    ],
    [
      "deny beats alsoAllow",
      { profile: "minimal", alsoAllow: ["sessions_send"], deny: ["sessions_send"] },
      ["session_status"],
    ],
    [
      "deny glob",
      { profile: "full", deny: ["sessions_*"] },
      ["agents_list", "cron", "message", "session_status", "subagents"],
    ],
    ["deny everything", { profile: "full", deny: ["*"] }, []],
    [
      "names compare case-insensitively",
      { profile: "full", deny: ["SESSIONS_SEND"] },
      ALL.filter((t) => t !== "sessions_send"),
    ],
    // per-agent override
    [
      "override profile replaces",
      { profile: "coding", agentOverride: { profile: "minimal" } },
      ["session_status"],
    ],
    ["override profile widens", { profile: "minimal", agentOverride: { profile: "full" } }, ALL],
    [
      "override alsoAllow adds to global alsoAllow",
      { profile: "minimal", alsoAllow: ["sessions_list"], agentOverride: { alsoAllow: ["sessions_send"] } },
      ["session_status", "sessions_list", "sessions_send"],
    ],
    [
      "override deny adds to global deny",
      { profile: "messaging", deny: ["sessions_send"], agentOverride: { deny: ["sessions_list"] } },
      ["message", "session_status", "sessions_history"],
    ],
    [
      "global deny still applies with an override profile",
      { profile: "minimal", deny: ["sessions_spawn"], agentOverride: { profile: "full" } },
      ALL.filter((t) => t !== "sessions_spawn"),
    ],
    [
      "override deny beats global alsoAllow",
      { profile: "minimal", alsoAllow: ["sessions_send"], agentOverride: { deny: ["sessions_send"] } },
      ["session_status"],
    ],
    // sub-agents
    [
      "sub-agent, not a leaf",
      { profile: "full", subagent: sub(1, 2) },
      ["sessions_history", "sessions_list", "sessions_spawn", "sessions_yield", "subagents"],
    ],
    // A leaf has nothing to wait for: by default it has no session tools at all.
    ["leaf sub-agent (depth = max)", { profile: "full", subagent: sub(1, 1) }, []],
    ["leaf sub-agent (depth > max)", { profile: "full", subagent: sub(3, 2) }, []],
    [
      "depth 2 of max 3 is not a leaf",
      { profile: "full", subagent: sub(2, 3) },
      ["sessions_history", "sessions_list", "sessions_spawn", "sessions_yield", "subagents"],
    ],
    [
      "sub-agent alsoAllow cannot re-add send/status/agents_list",
      { profile: "full", alsoAllow: ["*"], subagent: sub(1, 5) },
      ["sessions_history", "sessions_list", "sessions_spawn", "sessions_yield", "subagents"],
    ],
    [
      "sub-agent allow list restricts",
      { profile: "full", subagent: sub(1, 2, ["sessions_list", "sessions_yield"]) },
      ["sessions_list", "sessions_yield"],
    ],
    [
      "sub-agent allow list cannot re-add removed tools",
      { profile: "full", subagent: sub(1, 1, ["sessions_send", "sessions_list", "sessions_yield"]) },
      [],
    ],
    [
      "sub-agent deny",
      { profile: "full", subagent: sub(1, 2, [], ["sessions_spawn"]) },
      ["sessions_history", "sessions_list", "sessions_yield", "subagents"],
    ],
    [
      "sub-agent deny wins over allow",
      { profile: "full", subagent: sub(1, 2, ["sessions_list", "sessions_history"], ["sessions_history"]) },
      ["sessions_list"],
    ],
    [
      "sub-agent allow glob",
      { profile: "full", subagent: sub(1, 2, ["sessions_*"]) },
      ["sessions_history", "sessions_list", "sessions_spawn", "sessions_yield"],
    ],
    [
      "sub-agent on the messaging profile",
      { profile: "messaging", subagent: sub(1, 2) },
      ["sessions_history", "sessions_list"],
    ],
    ["leaf sub-agent on the messaging profile", { profile: "messaging", subagent: sub(1, 1) }, []],
    [
      "sub-agent: global deny still applies",
      { profile: "full", deny: ["subagents"], subagent: sub(1, 2) },
      ["sessions_history", "sessions_list", "sessions_spawn", "sessions_yield"],
    ],
  ])("%s", (_name, input, expected) => {
    expect(sorted(resolveToolSet({ ...base, ...input }))).toEqual([...expected].sort());
  });

  it("knownTools extends the universe", () => {
    const set = resolveToolSet({
      ...base,
      profile: "minimal",
      alsoAllow: ["read"],
      knownTools: [...SESSION_TOOLS, "read"],
    });
    expect(sorted(set)).toEqual(["read", "session_status"]);
  });
});

describe("explainDenied", () => {
  it.each<[string, string, Partial<ToolSetInput>, string | null]>([
    ["allowed → null", "sessions_list", { profile: "full" }, null],
    [
      "allowed via alsoAllow → null",
      "sessions_send",
      { profile: "minimal", alsoAllow: ["sessions_send"] },
      null,
    ],
    ["unknown tool", "exec", {}, 'unknown tool "exec"'],
    ["not in profile", "sessions_send", { profile: "minimal" }, "tools.profile"],
    ["not in profile names alsoAllow", "sessions_send", { profile: "minimal" }, "tools.alsoAllow"],
    [
      "not in the override profile",
      "sessions_send",
      { profile: "full", agentId: "ops", agentOverride: { profile: "minimal" } },
      "agents.list[ops].tools.profile",
    ],
    ["global deny", "sessions_spawn", { profile: "full", deny: ["sessions_spawn"] }, "tools.deny"],
    [
      "agent deny",
      "sessions_spawn",
      { profile: "full", agentId: "ops", agentOverride: { deny: ["sessions_spawn"] } },
      "agents.list[ops].tools.deny",
    ],
    ["never for sub-agents", "sessions_send", { profile: "full", subagent: sub(1, 3) }, "sub-agent"],
    [
      "leaf",
      "sessions_spawn",
      { profile: "full", subagent: sub(1, 1) },
      "agents.defaults.subagents.maxSpawnDepth",
    ],
    [
      "sub-agent deny",
      "sessions_spawn",
      { profile: "full", subagent: sub(1, 2, [], ["sessions_spawn"]) },
      "tools.subagents.tools.deny",
    ],
    [
      "sub-agent allow",
      "sessions_spawn",
      { profile: "full", subagent: sub(1, 2, ["sessions_list"]) },
      "tools.subagents.tools.allow",
    ],
  ])("%s", (_name, tool, input, expected) => {
    const msg = explainDenied(tool, { ...base, ...input });
    if (expected === null) expect(msg).toBeNull();
    else expect(msg).toContain(expected);
  });
});

describe("toolReport: which layer removed what", () => {
  const cfg = (over: Record<string, unknown>) => parseConfig(over);
  it.each([
    [
      "profile",
      cfg({ tools: { profile: "messaging" } }),
      { agentId: "main", depth: 0 },
      "sessions_spawn",
      "profile",
    ],
    [
      "tools.deny",
      cfg({ tools: { deny: ["sessions_send"] } }),
      { agentId: "main", depth: 0 },
      "sessions_send",
      "deny",
    ],
    [
      "agent override",
      cfg({ agents: { list: [{ id: "main", tools: { deny: ["subagents"] } }] } }),
      { agentId: "main", depth: 0 },
      "subagents",
      "agent",
    ],
    ["never for sub-agents", cfg({}), { agentId: "main", depth: 1 }, "session_status", "subagent"],
    ["leaf depth", cfg({}), { agentId: "main", depth: 1 }, "sessions_yield", "depth"],
    [
      "tools.subagents.tools.deny",
      cfg({
        agents: { defaults: { subagents: { maxSpawnDepth: 3 } } },
        tools: { subagents: { tools: { deny: ["subagents"] } } },
      }),
      { agentId: "main", depth: 1 },
      "subagents",
      "subagent",
    ],
  ])("%s", (_name, config, caller, tool, by) => {
    const r = toolReport(toolPolicyInput(config, caller));
    expect(r.allowed).not.toContain(tool);
    expect(r.removed.find((x) => x.name === tool)).toMatchObject({
      by,
      reason: expect.stringContaining(tool),
    });
    expect([...r.allowed, ...r.removed.map((x) => x.name)].sort()).toEqual([...SESSION_TOOLS].sort());
  });

  it("alsoAllow adds back what the profile lacks", () => {
    const r = toolReport(
      toolPolicyInput(parseConfig({ tools: { profile: "messaging", alsoAllow: ["subagents"] } }), {
        agentId: "main",
        depth: 0,
      }),
    );
    expect(r.allowed).toContain("subagents");
    expect(r.removed.map((x) => x.name)).not.toContain("subagents");
  });
});

describe("MCP tools (API.md §8.3)", () => {
  const mcpTools = ["files__read_file", "files__Write_File"];
  const input = (extra: Partial<ToolSetInput> = {}): ToolSetInput => ({
    profile: "minimal",
    alsoAllow: [],
    deny: [],
    knownTools: [...SESSION_TOOLS, ...mcpTools],
    mcpTools,
    ...extra,
  });

  it("join whatever profile the agent has, even minimal", () => {
    const set = resolveToolSet(input());
    expect([...set].sort()).toEqual(["files__Write_File", "files__read_file", "session_status"]);
  });

  it("tools.deny and the agent's deny remove them, by glob, case-blind", () => {
    expect(resolveToolSet(input({ deny: ["files__write_*"] })).has("files__Write_File")).toBe(false);
    const byAgent = input({ agentOverride: { deny: ["files__*"] }, agentId: "main" });
    expect(resolveToolSet(byAgent).has("files__read_file")).toBe(false);
    expect(explainDenied("files__read_file", byAgent)).toContain("agents.list[main].tools.deny");
  });

  it("the sub-agent allow list restricts them like any tool", () => {
    const sub = input({ subagent: { depth: 1, maxSpawnDepth: 1, allow: ["files__read_*"], deny: [] } });
    const set = resolveToolSet(sub);
    expect(set.has("files__read_file")).toBe(true);
    expect(set.has("files__Write_File")).toBe(false);
  });
});
