import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/index.js";
import {
  checkVisible,
  type SendPolicyDeps,
  sendBlocked,
  sendDecision,
  type VisibilityDeps,
} from "../../../src/policy/access.js";
import type { ToolCaller } from "../../../src/sessions/caller.js";
import type { SessionEntry, StoreDriver } from "../../../src/store/types.js";

/** The access checks built with only what they declare: the config, and for visibility a store. */

const entry = (key: string, over: Partial<SessionEntry> = {}): SessionEntry => ({
  key,
  sessionId: `sid-${key}`,
  agentId: key.split(":")[1] ?? "main",
  createdAt: 0,
  updatedAt: 0,
  ...over,
});

describe("sendDecision / sendBlocked with only the config", () => {
  const deps: SendPolicyDeps = {
    config: parseConfig({
      agents: { list: [{ id: "main" }] },
      session: {
        sendPolicy: { rules: [{ match: { channel: "telegram", chatType: "group" }, action: "deny" }] },
      },
    }),
  };

  it("takes the channel from the delivery context and the chat type from the key", () => {
    const group = entry("agent:main:telegram:group:-100", {
      deliveryContext: { channel: "telegram", to: "-100" },
    });
    const reason = "session.sendPolicy.rules[0] (deny) matched";
    expect(sendDecision(deps, group)).toEqual({ action: "deny", reason });
    expect(sendBlocked(deps, group)).toBe(`send blocked by session policy (${reason})`);
  });

  it("falls back to lastChannel; another chat type or channel is allowed", () => {
    expect(sendBlocked(deps, entry("agent:main:telegram:group:-7", { lastChannel: "telegram" }))).toContain(
      "send blocked by session policy",
    );
    expect(sendBlocked(deps, entry("agent:main:telegram:direct:u1", { lastChannel: "telegram" }))).toBeNull();
    expect(sendBlocked(deps, entry("agent:main:slack:group:c1", { lastChannel: "slack" }))).toBeNull();
  });

  it("a session's own override beats the rules", () => {
    const e = entry("agent:main:telegram:group:-100", { lastChannel: "telegram", sendPolicy: "allow" });
    expect(sendDecision(deps, e)).toEqual({ action: "allow", reason: "session override: allow" });
    expect(sendBlocked(deps, e)).toBeNull();
  });
});

describe("checkVisible with only the config and a store", () => {
  const rows = new Map<string, SessionEntry>();
  const put = (e: SessionEntry) => rows.set(e.key, e);
  put(entry("agent:main:main"));
  put(entry("agent:main:subagent:a", { spawnedBy: "agent:main:main" }));
  put(entry("agent:main:subagent:b", { spawnedBy: "agent:main:subagent:a" }));
  put(entry("agent:main:other"));
  // Only the read the chain walk makes; anything else would throw.
  const store = { sessions: { get: async (key: string) => rows.get(key) ?? null } } as unknown as StoreDriver;
  const deps: VisibilityDeps = { store, config: parseConfig({ agents: { list: [{ id: "main" }] } }) };
  const caller: ToolCaller = {
    sessionKey: "agent:main:main",
    agentId: "main",
    entry: entry("agent:main:main"),
    depth: 0,
    sandboxed: false,
  };
  const see = (key: string) => checkVisible(deps, caller, rows.get(key) ?? entry(key));

  it('"tree" (the default) sees what the caller spawned, through the store\'s spawnedBy chain', async () => {
    expect(await see("agent:main:subagent:a")).toEqual({ ok: true });
    expect(await see("agent:main:subagent:b")).toEqual({ ok: true });
  });

  it("a session outside the tree is refused, naming the setting", async () => {
    expect(await see("agent:main:other")).toMatchObject({ ok: false, setting: "tools.sessions.visibility" });
  });
});
