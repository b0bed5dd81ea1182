import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../../harness.js";
import { seedChild, seedSession } from "./seed-sessions.js";

/** agents_list through tools.invoke (SEMANTICS.md §3). */

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({
    models: { default: "scripted/demo", providers: { scripted: { kind: "scripted" } } },
    agents: {
      list: [
        {
          id: "main",
          name: "Main",
          subagents: { allowAgents: ["Writer", " research ", "ghost", "main", "bad id!"] },
        },
        { id: "research", name: "Research", model: "scripted/deep" },
        { id: "writer" },
        { id: "boss", subagents: { allowAgents: ["*"] } },
        { id: "loner" },
      ],
    },
  });
  for (const a of ["main", "boss", "loner"]) await seedSession(t, `agent:${a}:main`);
  await seedSession(t, "agent:stray:main", { agentId: "stray" });
});

afterAll(async () => {
  await t?.stop();
});

describe("agents_list", () => {
  it("caller first, then its allow-listed ids sorted; unconfigured ids are flagged", async () => {
    const r = await t.invoke("agent:main:main", "agents_list");
    expect(r).toEqual({
      requester: "main",
      allowAny: false,
      agents: [
        { id: "main", name: "Main", model: "scripted/demo", configured: true },
        { id: "ghost", configured: false },
        { id: "research", name: "Research", model: "scripted/deep", configured: true },
        { id: "writer", model: "scripted/demo", configured: true },
      ],
    });
  });

  it('"*" allows every configured agent', async () => {
    const r = await t.invoke("agent:boss:main", "agents_list");
    expect(r.allowAny).toBe(true);
    expect(r.agents.map((a: { id: string }) => a.id)).toEqual([
      "boss",
      "loner",
      "main",
      "research",
      "writer",
    ]);
    expect(r.agents.every((a: { configured: boolean }) => a.configured)).toBe(true);
  });

  it("without an allow list only the caller's own agent is listed", async () => {
    expect((await t.invoke("agent:loner:main", "agents_list")).agents).toEqual([
      { id: "loner", model: "scripted/demo", configured: true },
    ]);
    // A session of an agent that is no longer configured still gets an answer.
    expect(await t.invoke("agent:stray:main", "agents_list")).toEqual({
      requester: "stray",
      allowAny: false,
      agents: [{ id: "stray", configured: false }],
    });
  });

  it("takes no arguments and is never given to sub-agents", async () => {
    await expect(t.invoke("main", "agents_list", { agentId: "x" })).rejects.toMatchObject({
      code: "INVALID_PARAMS",
    });
    const main = await t.app.services.store.sessions.get("agent:main:main");
    if (!main) throw new Error("seeded main session missing");
    const child = await seedChild(t, main);
    await expect(t.invoke(child.key, "agents_list")).rejects.toMatchObject({
      code: "FORBIDDEN",
      message: expect.stringContaining("sub-agent"),
    });
  });
});
