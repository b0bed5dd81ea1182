import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/index.js";
import { defaultSpawnContext } from "../../../src/routing/thread-bindings.js";
import type { Services } from "../../../src/services/index.js";
import { attachmentDigests as omitAttachmentContents } from "../../../src/subagents/attachments.js";
import { spawnableAgentIds, subagentSettings } from "../../../src/subagents/limits.js";
import { childTaskText } from "../../../src/subagents/prompts.js";
import { sessionsSpawnTool } from "../../../src/tools/sessions-spawn.js";
import type { ToolCaller } from "../../../src/tools/types.js";

const config = parseConfig({
  agents: {
    defaults: {
      subagents: { maxSpawnDepth: 1, maxChildren: 3, runTimeoutSeconds: 0, archiveAfterMinutes: 60 },
    },
    list: [
      { id: "main", subagents: { allowAgents: ["Research", "ghost"] } },
      { id: "research", subagents: { maxSpawnDepth: 3, runTimeoutSeconds: 5 } },
      { id: "ops", subagents: { allowAgents: ["*"] } },
    ],
  },
});

describe("spawnableAgentIds", () => {
  it("is the caller's own agent first, then its allow-list filtered to configured agents", () => {
    expect(spawnableAgentIds(config, "main")).toEqual(["main", "research"]);
  });
  it("an empty allow-list allows only the caller's agent", () => {
    expect(spawnableAgentIds(config, "research")).toEqual(["research"]);
  });
  it('"*" allows every configured agent', () => {
    expect(spawnableAgentIds(config, "ops")).toEqual(["ops", "main", "research"]);
  });
});

describe("subagentSettings", () => {
  it("per-agent values override the defaults", () => {
    expect(subagentSettings(config, "research")).toEqual({
      maxSpawnDepth: 3,
      maxChildren: 3,
      runTimeoutSeconds: 5,
      archiveAfterMinutes: 60,
    });
    expect(subagentSettings(config, "main").maxSpawnDepth).toBe(1);
  });
});

describe("the schema the model sees", () => {
  const services = { config } as unknown as Services;
  const caller = { agentId: "main", sessionKey: "agent:main:main", depth: 0 } as ToolCaller;

  it("lists the allowed agent ids but still accepts others (they get a forbidden result, not an input error)", () => {
    const schema = sessionsSpawnTool.schema({ services, caller });
    expect(schema.safeParse({ task: "x", agentId: "OPS" }).success).toBe(true);
    expect(schema.safeParse({ task: "x", channel: "telegram" }).success).toBe(false);
    expect(schema.safeParse({ task: "" }).success).toBe(false);
    expect(schema.safeParse({ task: "x", runTimeoutSeconds: -1 }).success).toBe(false);
  });
});

describe("childTaskText", () => {
  it("ends with the task marker and names attachments as untrusted", () => {
    const text = childTaskText({
      depth: 1,
      maxDepth: 2,
      requesterKey: "agent:main:main",
      mode: "session",
      task: "count the stars",
      attachments: {
        absDir: "/ws/.switchboard/attachments/u",
        relDir: ".switchboard/attachments/u",
        count: 2,
        totalBytes: 9,
      },
    });
    expect(text.endsWith("[Subagent Task]: count the stars")).toBe(true);
    expect(text).toContain("/ws/.switchboard/attachments/u");
    expect(text).toContain("untrusted");
    expect(text).toContain("depth 1 of max 2");
    expect(text).toContain("thread");
  });
});

describe("omitAttachmentContents", () => {
  it("replaces each attachment by { name, bytes, sha256 } and keeps everything else", () => {
    const out = omitAttachmentContents({
      task: "t",
      attachments: [{ name: "a", content: "SECRET", encoding: "utf8" }, "junk"],
    }) as { task: string; attachments: unknown[] };
    expect(JSON.stringify(out)).not.toContain("SECRET");
    expect(out.task).toBe("t");
    expect(out.attachments[0]).toEqual({
      name: "a",
      bytes: 6,
      sha256: createHash("sha256").update("SECRET").digest("hex"),
    });
    expect(out.attachments[1]).toMatchObject({ name: "", bytes: 0 });
    expect(omitAttachmentContents({ task: "t" })).toEqual({ task: "t" });
  });
});

describe("depth check", () => {
  it("a caller at maxSpawnDepth is forbidden before anything is read or written", async () => {
    // No store, pipeline or channels: touching any of them would throw.
    const services = { config, now: () => 0 } as unknown as Services;
    const caller = {
      agentId: "main",
      sessionKey: "agent:main:subagent:x",
      depth: 1,
      sandboxed: false,
    } as ToolCaller;
    const res = await sessionsSpawnTool.execute(
      { task: "x" },
      { services, caller, signal: new AbortController().signal },
    );
    expect(res.status).toBe("forbidden");
    expect(String(res.error)).toContain("maxSpawnDepth");
    expect(String(res.error)).toContain("current depth 1, max 1");
  });
});

describe("defaultSpawnContext", () => {
  it("non-thread spawns are isolated; thread spawns fork unless configured isolated (channel wins)", () => {
    const base = parseConfig({});
    expect(defaultSpawnContext(base, false, "slack")).toBe("isolated");
    expect(defaultSpawnContext(base, true, "slack")).toBe("fork");
    const iso = parseConfig({ session: { threadBindings: { defaultSpawnContext: "isolated" } } });
    expect(defaultSpawnContext(iso, true, "slack")).toBe("isolated");
    const perChannel = parseConfig({
      session: { threadBindings: { defaultSpawnContext: "isolated" } },
      channels: {
        slack: { accounts: {}, threadBindings: { defaultSpawnContext: "fork" } },
        discord: { accounts: {}, threadBindings: { defaultSpawnContext: "isolated" } },
      },
    });
    expect(defaultSpawnContext(perChannel, true, "slack")).toBe("fork");
    expect(defaultSpawnContext(perChannel, true, "discord")).toBe("isolated");
    expect(defaultSpawnContext(perChannel, true, "telegram")).toBe("isolated");
    expect(defaultSpawnContext(perChannel, false, "slack")).toBe("isolated");
  });
});
