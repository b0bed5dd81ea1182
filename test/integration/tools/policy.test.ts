import { afterEach, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../../src/config/index.js";
import type { SessionEntry } from "../../../src/store/types.js";
import { contentText, startOpenAIFake } from "../../fakes/openai.js";
import { startTestApp, type TestApp } from "../../harness.js";
import { say, seedChild, seedSession } from "./seed-sessions.js";

/**
 * Tool policy and session visibility through `tools.invoke` (API.md §4: exactly the checks a
 * model's call gets), plus one real model loop to show the model path applies the same rules.
 */

let t: TestApp | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

async function start(overrides: Partial<ConfigInput> = {}): Promise<TestApp> {
  t = await startTestApp(overrides);
  return t;
}

const READ_TOOLS = ["sessions_list", "sessions_history", "session_status", "agents_list"] as const;
type ReadTool = (typeof READ_TOOLS)[number];
const ARGS: Record<ReadTool, Record<string, unknown>> = {
  sessions_list: {},
  sessions_history: { sessionKey: "current" },
  session_status: {},
  agents_list: {},
};

/** Which read tools `key` may call: tool name → null (allowed) or the FORBIDDEN message. */
async function toolAccess(app: TestApp, key: string): Promise<Record<ReadTool, string | null>> {
  const out = {} as Record<ReadTool, string | null>;
  for (const tool of READ_TOOLS) {
    try {
      await app.invoke(key, tool, ARGS[tool]);
      out[tool] = null;
    } catch (err) {
      const e = err as Error & { code?: string };
      expect(e.code).toBe("FORBIDDEN");
      out[tool] = e.message;
    }
  }
  return out;
}

const allowedOf = (access: Record<ReadTool, string | null>) =>
  READ_TOOLS.filter((tool) => access[tool] === null);

describe("tool profiles, alsoAllow and deny", () => {
  const cases: Array<{
    name: string;
    tools: ConfigInput["tools"];
    allowed: ReadTool[];
    denied?: { tool: ReadTool; names: string };
  }> = [
    {
      name: "minimal",
      tools: { profile: "minimal" },
      allowed: ["session_status"],
      denied: { tool: "sessions_list", names: 'not in the "minimal" tool profile (tools.profile)' },
    },
    {
      name: "messaging",
      tools: { profile: "messaging" },
      allowed: ["sessions_list", "sessions_history", "session_status"],
      denied: { tool: "agents_list", names: "tools.alsoAllow" },
    },
    { name: "coding", tools: { profile: "coding" }, allowed: [...READ_TOOLS] },
    { name: "full", tools: { profile: "full" }, allowed: [...READ_TOOLS] },
    {
      name: "minimal + alsoAllow glob",
      tools: { profile: "minimal", alsoAllow: ["agents_*"] },
      allowed: ["session_status", "agents_list"],
    },
    {
      name: "coding − deny glob",
      tools: { profile: "coding", deny: ["SESSIONS_*"] },
      allowed: ["session_status", "agents_list"],
      denied: { tool: "sessions_history", names: "denied by tools.deny" },
    },
    {
      name: "deny wins over alsoAllow",
      tools: { profile: "minimal", alsoAllow: ["sessions_list"], deny: ["sessions_list"] },
      allowed: ["session_status"],
      denied: { tool: "sessions_list", names: "denied by tools.deny" },
    },
  ];

  for (const c of cases) {
    it(c.name, async () => {
      const app = await start({ tools: c.tools });
      await seedSession(app, "agent:main:main");
      const access = await toolAccess(app, "agent:main:main");
      expect(allowedOf(access).sort()).toEqual([...c.allowed].sort());
      if (c.denied) expect(access[c.denied.tool]).toContain(c.denied.names);
    });
  }

  it("per-agent overrides replace the profile and add to alsoAllow/deny, naming the agent's setting", async () => {
    const app = await start({
      tools: { profile: "messaging" },
      agents: {
        list: [
          { id: "main" },
          { id: "ops", tools: { profile: "minimal" } },
          { id: "qa", tools: { deny: ["session_status"] } },
          { id: "pm", tools: { alsoAllow: ["agents_list"] } },
        ],
      },
    });
    for (const a of ["main", "ops", "qa", "pm"]) await seedSession(app, `agent:${a}:main`);
    const main = await toolAccess(app, "agent:main:main");
    const ops = await toolAccess(app, "agent:ops:main");
    const qa = await toolAccess(app, "agent:qa:main");
    const pm = await toolAccess(app, "agent:pm:main");
    expect(allowedOf(main)).toEqual(["sessions_list", "sessions_history", "session_status"]);
    expect(allowedOf(ops)).toEqual(["session_status"]);
    expect(ops.sessions_list).toContain("agents.list[ops].tools.profile");
    expect(allowedOf(qa)).toEqual(["sessions_list", "sessions_history"]);
    expect(qa.session_status).toContain("agents.list[qa].tools.deny");
    expect(allowedOf(pm)).toEqual([...READ_TOOLS]);
  });
});

describe("sub-agent tool sets by depth", () => {
  async function family(overrides: Partial<ConfigInput>) {
    const app = await start(overrides);
    const main = await seedSession(app, "agent:main:main");
    const child = await seedChild(app, main);
    const grandchild = await seedChild(app, child);
    return { app, main, child, grandchild };
  }

  it("a leaf (depth ≥ maxSpawnDepth, default 1) loses every read tool", async () => {
    const { app, child } = await family({});
    const access = await toolAccess(app, child.key);
    expect(allowedOf(access)).toEqual([]);
    expect(access.sessions_list).toContain("leaf sub-agent");
    expect(access.sessions_list).toContain("maxSpawnDepth");
    expect(access.session_status).toContain("never available to sub-agent");
    expect(access.agents_list).toContain("never available to sub-agent");
  });

  it("below the leaf a sub-agent may list and read, never status or agents", async () => {
    const { app, main, child, grandchild } = await family({
      agents: { defaults: { subagents: { maxSpawnDepth: 2 } } },
    });
    expect(allowedOf(await toolAccess(app, main.key))).toEqual([...READ_TOOLS]);
    expect(allowedOf(await toolAccess(app, child.key))).toEqual(["sessions_list", "sessions_history"]);
    const leaf = await toolAccess(app, grandchild.key);
    expect(allowedOf(leaf)).toEqual([]);
    expect(leaf.sessions_history).toContain("depth 2 ≥ maxSpawnDepth 2");
  });

  it("tools.subagents.tools allow/deny apply to sub-agents only (deny wins)", async () => {
    const denied = await family({
      agents: { defaults: { subagents: { maxSpawnDepth: 2 } } },
      tools: { subagents: { tools: { allow: ["sessions_*"], deny: ["sessions_history"] } } },
    });
    const access = await toolAccess(denied.app, denied.child.key);
    expect(allowedOf(access)).toEqual(["sessions_list"]);
    expect(access.sessions_history).toContain("tools.subagents.tools.deny");
    expect(allowedOf(await toolAccess(denied.app, denied.main.key))).toEqual([...READ_TOOLS]);
    await denied.app.stop();
    t = undefined;

    const allowOnly = await family({
      agents: { defaults: { subagents: { maxSpawnDepth: 2 } } },
      tools: { subagents: { tools: { allow: ["sessions_history"] } } },
    });
    const a = await toolAccess(allowOnly.app, allowOnly.child.key);
    expect(allowedOf(a)).toEqual(["sessions_history"]);
    expect(a.sessions_list).toContain("tools.subagents.tools.allow");
  });
});

// ─── visibility table ──────────────────────────────────────────────────────────────────────────

interface World {
  app: TestApp;
  /** name → entry: M main, C child, G grandchild, N neighbour DM, XC child under agent ops, X ops main, Y hr main. */
  s: Record<"M" | "C" | "G" | "N" | "XC" | "X" | "Y", SessionEntry>;
}

const SECRET_NOTE = "bob-private-note-7781";

async function world(overrides: Partial<ConfigInput>): Promise<World> {
  const app = await start({
    agents: { list: [{ id: "main" }, { id: "ops" }, { id: "hr" }], ...(overrides.agents ?? {}) },
    ...Object.fromEntries(Object.entries(overrides).filter(([k]) => k !== "agents")),
  });
  const M = await seedSession(app, "agent:main:main", { ageMs: 70_000 });
  const C = await seedChild(app, M, { ageMs: 60_000 });
  const G = await seedChild(app, C, { ageMs: 50_000 });
  const N = await seedSession(app, "agent:main:telegram:direct:bob", { ageMs: 40_000 });
  await say(app, N, "user", SECRET_NOTE);
  const XC = await seedChild(app, M, { agent: "ops", ageMs: 30_000 });
  const X = await seedSession(app, "agent:ops:main", { ageMs: 20_000 });
  await say(app, X, "user", SECRET_NOTE);
  const Y = await seedSession(app, "agent:hr:main", { ageMs: 10_000 });
  return { app, s: { M, C, G, N, XC, X, Y } };
}

type Name = keyof World["s"];
const visibilityRows: Array<{
  name: string;
  config: Partial<ConfigInput>;
  sees: Name[];
  /** An invisible session and the setting its denial must name. */
  denied?: [Name, string];
}> = [
  {
    name: "self",
    config: { tools: { sessions: { visibility: "self" } } },
    sees: ["M"],
    denied: ["C", "tools.sessions.visibility"],
  },
  {
    name: "tree (default)",
    config: {},
    sees: ["M", "C", "G", "XC"],
    denied: ["N", 'set tools.sessions.visibility to "agent"'],
  },
  {
    name: "agent",
    config: { tools: { sessions: { visibility: "agent" } } },
    sees: ["M", "C", "G", "XC", "N"],
    denied: ["X", 'set tools.sessions.visibility to "all" and enable tools.agentToAgent'],
  },
  {
    name: "all without agentToAgent",
    config: { tools: { sessions: { visibility: "all" } } },
    sees: ["M", "C", "G", "XC", "N"],
    denied: ["X", "tools.agentToAgent.enabled"],
  },
  {
    name: "all + agentToAgent (empty allow = every agent)",
    config: { tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } } },
    sees: ["M", "C", "G", "XC", "N", "X", "Y"],
  },
  {
    name: "all + agentToAgent allow list",
    config: {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "ops"] } },
    },
    sees: ["M", "C", "G", "XC", "N", "X"],
    denied: ["Y", "tools.agentToAgent.allow"],
  },
  {
    name: "all + agentToAgent globs are case-insensitive",
    config: {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["MA*", "O*"] } },
    },
    sees: ["M", "C", "G", "XC", "N", "X"],
    denied: ["Y", "tools.agentToAgent.allow"],
  },
  {
    name: "all + agentToAgent plain entries are exact",
    config: {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["Main", "ops"] } },
    },
    sees: ["M", "C", "G", "XC", "N"],
    denied: ["X", "tools.agentToAgent.allow"],
  },
  {
    name: "sandbox clamps all to tree",
    config: {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      agents: { defaults: { sandbox: { mode: "all" } } },
    },
    sees: ["M", "C", "G", "XC"],
    denied: ["N", "agents.defaults.sandbox.sessionToolsVisibility"],
  },
  {
    name: "a per-agent sandbox clamps too",
    config: {
      tools: { sessions: { visibility: "agent" } },
      agents: { list: [{ id: "main", sandbox: { mode: "all" } }, { id: "ops" }, { id: "hr" }] },
    },
    sees: ["M", "C", "G", "XC"],
    denied: ["N", "agents.defaults.sandbox.sessionToolsVisibility"],
  },
  {
    name: "sandbox never widens self",
    config: {
      tools: { sessions: { visibility: "self" } },
      agents: { defaults: { sandbox: { mode: "all" } } },
    },
    sees: ["M"],
    denied: ["C", "tools.sessions.visibility"],
  },
  {
    name: 'sandbox with sessionToolsVisibility "all" keeps the configured visibility',
    config: {
      tools: { sessions: { visibility: "agent" } },
      agents: { defaults: { sandbox: { mode: "all", sessionToolsVisibility: "all" } } },
    },
    sees: ["M", "C", "G", "XC", "N"],
  },
];

describe("visibility through the tools (caller: agent:main:main)", () => {
  for (const row of visibilityRows) {
    it(row.name, async () => {
      const { app, s } = await world(row.config);
      const display = (n: Name) => (n === "M" ? "main" : s[n].key);
      const listed = await app.invoke("agent:main:main", "sessions_list", { limit: 200 });
      expect(listed.count).toBe(listed.sessions.length);
      expect(listed.sessions.map((r: { key: string }) => r.key).sort()).toEqual(row.sees.map(display).sort());

      // Every tool agrees with the list, key by key.
      for (const n of Object.keys(s) as Name[]) {
        const visible = row.sees.includes(n);
        const h = await app.invoke("agent:main:main", "sessions_history", { sessionKey: s[n].key });
        const st = await app.invoke("agent:main:main", "session_status", { sessionKey: s[n].key });
        if (visible) {
          expect(h.status, `${n} history`).toBeUndefined();
          expect(Array.isArray(h.messages)).toBe(true);
          expect(st.status, `${n} status`).toBe("ok");
        } else {
          expect(h, `${n} history`).toEqual({
            status: "forbidden",
            error: expect.any(String),
            sessionKey: s[n].key,
          });
          expect(st, `${n} status`).toEqual({
            status: "forbidden",
            error: expect.any(String),
            sessionKey: s[n].key,
          });
          expect(h.error).toBe(st.error);
          expect(JSON.stringify(h)).not.toContain(SECRET_NOTE);
        }
      }
      if (row.denied) {
        const [n, setting] = row.denied;
        const h = await app.invoke("agent:main:main", "sessions_history", { sessionKey: s[n].sessionId });
        expect(h.status).toBe("forbidden");
        expect(h.error).toContain(setting);
      }
    });
  }

  it("in sessions_list an invisible session is indistinguishable from a missing one", async () => {
    const { app, s } = await world({});
    const missing = "agent:main:telegram:direct:nobody";
    for (const args of [{ search: "bob" }, { label: "x" }, { kinds: ["other"] }, {}]) {
      const withNeighbour = await app.invoke("main", "sessions_list", args);
      await app.app.services.store.sessions.delete(s.N.key);
      const without = await app.invoke("main", "sessions_list", args);
      await app.app.services.store.sessions.put(s.N);
      expect(withNeighbour).toEqual(without);
    }
    expect(await app.invoke("main", "sessions_list", { search: "bob" })).toEqual(
      await app.invoke("main", "sessions_list", { search: "nobody" }),
    );
    // history/status may say "forbidden" (SEMANTICS §2), but never with the neighbour's content.
    expect((await app.invoke("main", "sessions_history", { sessionKey: missing })).status).toBe("error");
    expect((await app.invoke("main", "sessions_history", { sessionKey: s.N.key })).status).toBe("forbidden");
  });
});

describe("the model path gets the same checks", () => {
  it("offers only the profile's tools and returns forbidden/invalid results to the model", async () => {
    const fake = await startOpenAIFake();
    try {
      const app = await start({
        models: {
          default: "fake/m",
          providers: { fake: { kind: "openai", baseUrl: fake.url, apiKey: "k" } },
        },
        tools: { profile: "messaging" },
      });
      await seedSession(app, "agent:main:main");
      const bob = await seedSession(app, "agent:main:telegram:direct:bob");
      await say(app, bob, "user", SECRET_NOTE);
      fake.enqueue(
        {
          toolCalls: [
            { name: "sessions_history", arguments: { sessionKey: bob.key } },
            { name: "sessions_list", arguments: { limit: -3 } },
          ],
        },
        { text: "done" },
      );
      const r = await app.rpc("chat.send", {
        sessionKey: "main",
        message: "look around",
        timeoutSeconds: 30,
      });
      expect(r.result).toMatchObject({ status: "ok", reply: "done" });

      const [first, second] = fake.chatRequests();
      const offered = (first?.body.tools ?? []).map((x) => x.function.name).sort();
      expect(offered).toEqual([
        "message",
        "session_status",
        "sessions_history",
        "sessions_list",
        "sessions_send",
      ]);
      const toolMsgs = (second?.body.messages ?? [])
        .filter((m) => m.role === "tool")
        .map((m) => contentText(m.content));
      expect(toolMsgs).toHaveLength(2);
      expect(toolMsgs[0]).toContain("forbidden");
      expect(toolMsgs[0]).not.toContain(SECRET_NOTE);
      expect(toolMsgs[1]).toContain("limit");
    } finally {
      await fake.close();
    }
  });
});
