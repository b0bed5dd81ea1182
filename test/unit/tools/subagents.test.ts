import { describe, expect, it } from "vitest";
import type { RunRecord, SessionEntry } from "../../../src/store/types.js";
import { type ChildRun, indexed, resolveTarget } from "../../../src/subagents/children.js";
import { subagentsTool } from "../../../src/tools/subagents.js";

const NOW = 10_000_000;

function child(
  n: number,
  opts: { label?: string; status: RunRecord["status"]; endedAgoMs?: number },
): ChildRun {
  const runId = `${n}${n}${n}aaaa-0000-4000-8000-00000000000${n}`;
  const entry: SessionEntry = {
    key: `agent:main:subagent:0000000${n}-0000-4000-8000-000000000000`,
    sessionId: `s${n}`,
    agentId: "main",
    createdAt: NOW - n * 1000,
    updatedAt: NOW,
    spawnedBy: "agent:main:main",
    ...(opts.label ? { label: opts.label } : {}),
    subagent: {
      task: `task ${n}`,
      runId,
      mode: "run",
      cleanup: "keep",
      runTimeoutSeconds: 0,
      sandboxed: false,
    },
  };
  const final = !["queued", "running"].includes(opts.status);
  const run: RunRecord = {
    runId,
    sessionKey: entry.key,
    agentId: "main",
    status: opts.status,
    createdAt: entry.createdAt,
    ...(final ? { endedAt: NOW - (opts.endedAgoMs ?? 0) } : {}),
  };
  return { entry, run, active: !final };
}

// Newest spawn first, as loadChildren returns them.
const children = [
  child(1, { label: "alpha", status: "ok", endedAgoMs: 60_000 }),
  child(2, { label: "beta", status: "running" }),
  child(3, { label: "Alphabet", status: "queued" }),
  child(4, { label: "old", status: "error", endedAgoMs: 31 * 60_000 }),
];

describe("indexed", () => {
  it("puts active runs first, then those ended within 30 minutes; older ones drop out", () => {
    const { active, recent } = indexed(children, NOW);
    expect(active.map((c) => c.entry.label)).toEqual(["beta", "Alphabet"]);
    expect(recent.map((c) => c.entry.label)).toEqual(["alpha"]);
  });
});

describe("resolveTarget", () => {
  const label = (t: string) => {
    const r = resolveTarget(children, t, NOW, "kill");
    return r.ok ? (r.child.entry.label ?? "") : `error: ${String(r.result.error)}`;
  };

  it("last = newest spawn; a number is a 1-based index over active then recent", () => {
    expect(label("last")).toBe("alpha");
    expect(label("1")).toBe("beta");
    expect(label("2")).toBe("Alphabet");
    expect(label("3")).toBe("alpha");
    expect(label("9")).toContain("error: no sub-agent with index 9");
  });

  it("a key matches exactly (case-insensitive)", () => {
    expect(label(children[3]!.entry.key.toUpperCase())).toBe("old");
    expect(label("agent:main:subagent:nope")).toContain("error");
  });

  it("label: exact (case-insensitive) first, then a unique prefix", () => {
    expect(label("ALPHA")).toBe("alpha"); // exact beats the prefix match on Alphabet
    expect(label("alphab")).toBe("Alphabet");
    expect(label("o")).toBe("old");
  });

  it("then a unique runId prefix; ambiguity is an error", () => {
    expect(label("222")).toBe("beta");
    const twins = [child(5, { label: "dup", status: "ok" }), child(6, { label: "dup", status: "ok" })];
    const r = resolveTarget(twins, "dup", NOW, "steer");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.result).toMatchObject({ status: "error", action: "steer", target: "dup" });
    expect(label("zzz")).toContain("error: no sub-agent matches");
  });

  it("no children is an error", () => {
    expect(resolveTarget([], "last", NOW, "kill").ok).toBe(false);
  });
});

describe("schema", () => {
  it("defaults to list, bounds steer messages at 4,000 chars and rejects unknown keys", () => {
    const schema = subagentsTool.schema({} as never);
    expect(schema.parse({})).toEqual({ action: "list" });
    expect(schema.safeParse({ action: "steer", target: "1", message: "x".repeat(4000) }).success).toBe(true);
    expect(schema.safeParse({ action: "steer", target: "1", message: "x".repeat(4001) }).success).toBe(false);
    expect(schema.safeParse({ action: "list", foo: 1 }).success).toBe(false);
    expect(schema.safeParse({ action: "wait" }).success).toBe(false);
  });
});
