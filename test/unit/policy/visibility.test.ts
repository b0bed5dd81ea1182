import { describe, expect, it } from "vitest";
import {
  type AgentToAgentPolicy,
  agentToAgentAllowed,
  type CanSeeInput,
  canSee,
  effectiveVisibility,
  matchAgentGlob,
  type Visibility,
} from "../../../src/policy/visibility.js";

const CALLER = { key: "agent:main:telegram:direct:u1", agentId: "main" };
const OFF: AgentToAgentPolicy = { enabled: false, allow: [] };

/** Targets by their relation to CALLER. */
const TARGETS = {
  own: { key: "AGENT:MAIN:TELEGRAM:DIRECT:U1", agentId: "main", spawnedByChain: [] },
  child: { key: "agent:main:subagent:c1", agentId: "main", spawnedByChain: [CALLER.key] },
  grandchild: {
    key: "agent:main:subagent:c2",
    agentId: "main",
    spawnedByChain: ["agent:main:subagent:c1", CALLER.key],
  },
  sibling: { key: "agent:main:main", agentId: "main", spawnedByChain: [] },
  otherTree: { key: "agent:main:subagent:x", agentId: "main", spawnedByChain: ["agent:main:main"] },
  crossChild: { key: "agent:ops:subagent:c3", agentId: "ops", spawnedByChain: [CALLER.key.toUpperCase()] },
  crossOther: { key: "agent:ops:main", agentId: "ops", spawnedByChain: [] },
} as const;

type Outcome = "ok" | "vis" | "a2a.enabled" | "a2a.allow";
const SETTING: Record<Exclude<Outcome, "ok">, string> = {
  vis: "tools.sessions.visibility",
  "a2a.enabled": "tools.agentToAgent.enabled",
  "a2a.allow": "tools.agentToAgent.allow",
};

// Expected outcome per target and visibility, with agent-to-agent disabled.
const MATRIX: Record<keyof typeof TARGETS, Record<Visibility, Outcome>> = {
  own: { self: "ok", tree: "ok", agent: "ok", all: "ok" },
  child: { self: "vis", tree: "ok", agent: "ok", all: "ok" },
  grandchild: { self: "vis", tree: "ok", agent: "ok", all: "ok" },
  sibling: { self: "vis", tree: "vis", agent: "ok", all: "ok" },
  otherTree: { self: "vis", tree: "vis", agent: "ok", all: "ok" },
  crossChild: { self: "vis", tree: "ok", agent: "ok", all: "ok" },
  crossOther: { self: "vis", tree: "vis", agent: "vis", all: "a2a.enabled" },
};

function expectOutcome(input: CanSeeInput, outcome: Outcome) {
  const d = canSee(input);
  if (outcome === "ok") {
    expect(d).toEqual({ ok: true });
    return;
  }
  expect(d.ok).toBe(false);
  if (!d.ok) {
    expect(d.setting).toBe(SETTING[outcome]);
    expect(d.reason).toContain(SETTING[outcome]);
  }
}

describe("canSee: every visibility × relation (agent-to-agent off)", () => {
  const rows = Object.entries(MATRIX).flatMap(([rel, byVis]) =>
    (Object.entries(byVis) as Array<[Visibility, Outcome]>).map(([vis, out]) => [rel, vis, out] as const),
  );
  it.each(rows)("%s under %s → %s", (rel, visibility, outcome) => {
    const target = TARGETS[rel as keyof typeof TARGETS];
    expectOutcome({ visibility, caller: CALLER, target, agentToAgent: OFF }, outcome);
  });
});

describe("canSee: cross-agent under all, by agentToAgent policy", () => {
  it.each<[string, AgentToAgentPolicy, Outcome]>([
    ["disabled", { enabled: false, allow: ["*"] }, "a2a.enabled"],
    ["enabled, empty allow = all", { enabled: true, allow: [] }, "ok"],
    ["enabled, both listed", { enabled: true, allow: ["main", "ops"] }, "ok"],
    ["enabled, only caller listed", { enabled: true, allow: ["main"] }, "a2a.allow"],
    ["enabled, only target listed", { enabled: true, allow: ["ops"] }, "a2a.allow"],
    ["enabled, star", { enabled: true, allow: ["*"] }, "ok"],
    ["enabled, globs", { enabled: true, allow: ["m*", "O*"] }, "ok"],
    ["enabled, plain entries are exact (case)", { enabled: true, allow: ["MAIN", "ops"] }, "a2a.allow"],
    ["enabled, blank pattern matches nothing", { enabled: true, allow: [" "] }, "a2a.allow"],
  ])("%s", (_name, agentToAgent, outcome) => {
    expectOutcome({ visibility: "all", caller: CALLER, target: TARGETS.crossOther, agentToAgent }, outcome);
  });

  it.each<Visibility>(["self", "tree", "agent"])("agentToAgent does not widen %s", (visibility) => {
    const d = canSee({
      visibility,
      caller: CALLER,
      target: TARGETS.crossOther,
      agentToAgent: { enabled: true, allow: [] },
    });
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.setting).toBe("tools.sessions.visibility");
  });

  it("names the visibility that would allow it", () => {
    const bySibling = canSee({
      visibility: "tree",
      caller: CALLER,
      target: TARGETS.sibling,
      agentToAgent: OFF,
    });
    expect(!bySibling.ok && bySibling.reason).toContain('"agent"');
    const byChild = canSee({ visibility: "self", caller: CALLER, target: TARGETS.child, agentToAgent: OFF });
    expect(!byChild.ok && byChild.reason).toContain('"tree"');
    const byCross = canSee({
      visibility: "agent",
      caller: CALLER,
      target: TARGETS.crossOther,
      agentToAgent: OFF,
    });
    expect(!byCross.ok && byCross.reason).toContain('"all"');
  });
});

describe("effectiveVisibility (sandbox clamp)", () => {
  it.each<[Visibility, boolean, "spawned" | "all", Visibility]>([
    ["self", false, "spawned", "self"],
    ["tree", false, "spawned", "tree"],
    ["agent", false, "spawned", "agent"],
    ["all", false, "spawned", "all"],
    ["self", true, "spawned", "self"],
    ["tree", true, "spawned", "tree"],
    ["agent", true, "spawned", "tree"],
    ["all", true, "spawned", "tree"],
    ["self", true, "all", "self"],
    ["tree", true, "all", "tree"],
    ["agent", true, "all", "agent"],
    ["all", true, "all", "all"],
    ["agent", false, "all", "agent"],
  ])("configured %s, sandboxed %s, %s → %s", (configured, sandboxed, sessionToolsVisibility, expected) => {
    expect(effectiveVisibility({ configured, sandboxed, sessionToolsVisibility })).toBe(expected);
  });

  it("a clamped denial names the sandbox setting", () => {
    const d = canSee({
      visibility: "tree",
      configured: "agent",
      caller: CALLER,
      target: TARGETS.sibling,
      agentToAgent: OFF,
    });
    expect(d).toMatchObject({ ok: false, setting: "agents.defaults.sandbox.sessionToolsVisibility" });
  });

  it("a clamped denial also says what would still block", () => {
    const d = canSee({
      visibility: "tree",
      configured: "all",
      caller: CALLER,
      target: TARGETS.crossOther,
      agentToAgent: OFF,
    });
    expect(d).toMatchObject({ ok: false, setting: "agents.defaults.sandbox.sessionToolsVisibility" });
    expect(!d.ok && d.reason).toContain("tools.agentToAgent.enabled");
  });

  it("the clamp does not hide what the clamped visibility allows", () => {
    const d = canSee({
      visibility: "tree",
      configured: "all",
      caller: CALLER,
      target: TARGETS.child,
      agentToAgent: OFF,
    });
    expect(d).toEqual({ ok: true });
  });

  it("an unclamped denial names the ordinary setting", () => {
    const d = canSee({
      visibility: "tree",
      configured: "tree",
      caller: CALLER,
      target: TARGETS.sibling,
      agentToAgent: OFF,
    });
    expect(d).toMatchObject({ ok: false, setting: "tools.sessions.visibility" });
  });
});

describe("matchAgentGlob", () => {
  it.each([
    ["*", "anything", true],
    ["main", "main", true],
    ["main", "Main", false],
    ["Main", "main", false],
    [" main ", "main", true],
    ["main", "main2", false],
    ["ma*", "main", true],
    ["MA*", "main", true],
    ["*-bot", "support-bot", true],
    ["*-bot", "support-bots", false],
    ["a*c", "abc", true],
    ["a*c", "abcd", false],
    ["a.c*", "abcd", false],
    ["a.c*", "a.cd", true],
    ["", "main", false],
    ["  ", "main", false],
  ])("%j vs %j → %s", (pattern, id, expected) => {
    expect(matchAgentGlob(pattern, id)).toBe(expected);
  });

  it.each<[string, string, AgentToAgentPolicy, boolean]>([
    ["main", "main", { enabled: false, allow: [] }, true],
    ["main", "ops", { enabled: false, allow: [] }, false],
    ["main", "ops", { enabled: true, allow: [] }, true],
    ["main", "ops", { enabled: true, allow: ["main"] }, false],
    ["main", "ops", { enabled: true, allow: ["main", "o*"] }, true],
  ])("agentToAgentAllowed(%s, %s, %j) = %s", (a, b, policy, expected) => {
    expect(agentToAgentAllowed(a, b, policy)).toBe(expected);
  });
});
