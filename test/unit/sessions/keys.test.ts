import { describe, expect, it } from "vitest";
import { SwitchboardError } from "../../../src/errors.js";
import {
  type BuildSessionKeyInput,
  buildSessionKey,
  classifyKind,
  cronKey,
  deriveChannel,
  displayKey,
  hookKey,
  isReservedKey,
  isThreadKey,
  mainKey,
  nodeKey,
  normalizeAgentId,
  normalizeKeyInput,
  type ParsedSessionKey,
  parseSessionKey,
  subagentKey,
  UUID_V4_RE,
} from "../../../src/sessions/keys.js";

const dm = (over: Partial<BuildSessionKeyInput>): BuildSessionKeyInput => ({
  agentId: "main",
  channel: "telegram",
  chatType: "direct",
  peerId: "111",
  dmScope: "main",
  ...over,
});

const links = { alice: ["telegram:111", "Discord:222"], bob: ["333"] };

describe("buildSessionKey", () => {
  const rows: Array<[string, BuildSessionKeyInput, string]> = [
    // DMs by dmScope
    ["dm, scope main", dm({}), "agent:main:main"],
    ["dm, per-peer", dm({ dmScope: "per-peer" }), "agent:main:direct:111"],
    ["dm, per-channel-peer", dm({ dmScope: "per-channel-peer" }), "agent:main:telegram:direct:111"],
    [
      "dm, per-account-channel-peer",
      dm({ dmScope: "per-account-channel-peer", accountId: "bot2" }),
      "agent:main:telegram:bot2:direct:111",
    ],
    [
      "dm, per-account-channel-peer without account → default",
      dm({ dmScope: "per-account-channel-peer" }),
      "agent:main:telegram:default:direct:111",
    ],
    [
      "dm, per-account-channel-peer blank account → default",
      dm({ dmScope: "per-account-channel-peer", accountId: "  " }),
      "agent:main:telegram:default:direct:111",
    ],
    // empty / blank peer → main bucket
    ["empty peer, per-peer", dm({ dmScope: "per-peer", peerId: "" }), "agent:main:main"],
    ["blank peer, per-channel-peer", dm({ dmScope: "per-channel-peer", peerId: "   " }), "agent:main:main"],
    [
      "empty peer, per-account-channel-peer",
      dm({ dmScope: "per-account-channel-peer", peerId: "" }),
      "agent:main:main",
    ],
    ["empty peer, group", dm({ chatType: "group", peerId: "" }), "agent:main:main"],
    // groups and channels
    ["group", dm({ chatType: "group", peerId: "-100123" }), "agent:main:telegram:group:-100123"],
    [
      "group ignores dmScope",
      dm({ chatType: "group", peerId: "g1", dmScope: "per-peer" }),
      "agent:main:telegram:group:g1",
    ],
    [
      "channel",
      dm({ channel: "slack", chatType: "channel", peerId: "C0ABC" }),
      "agent:main:slack:channel:c0abc",
    ],
    // threads and topics
    [
      "thread in a channel",
      dm({ channel: "slack", chatType: "channel", peerId: "C1", threadId: "1712345678.000100" }),
      "agent:main:slack:channel:c1:thread:1712345678.000100",
    ],
    [
      "thread in a group",
      dm({ channel: "discord", chatType: "group", peerId: "G1", threadId: "987" }),
      "agent:main:discord:group:g1:thread:987",
    ],
    [
      "telegram forum topic",
      dm({ chatType: "group", peerId: "-1001", topicId: "42" }),
      "agent:main:telegram:group:-1001:topic:42",
    ],
    [
      "topic then thread",
      dm({ chatType: "group", peerId: "-1001", topicId: "42", threadId: "7" }),
      "agent:main:telegram:group:-1001:topic:42:thread:7",
    ],
    [
      "blank thread id is no thread",
      dm({ chatType: "group", peerId: "g", threadId: "  " }),
      "agent:main:telegram:group:g",
    ],
    [
      "blank topic id is no topic",
      dm({ chatType: "group", peerId: "g", topicId: "" }),
      "agent:main:telegram:group:g",
    ],
    ["dm thread in main scope", dm({ threadId: "T9" }), "agent:main:main:thread:t9"],
    // case and whitespace
    [
      "upper case agent, channel, peer, thread",
      dm({ agentId: " Ops ", channel: " Slack ", chatType: "channel", peerId: " C0XYZ ", threadId: " ABC " }),
      "agent:ops:slack:channel:c0xyz:thread:abc",
    ],
    ["upper case dm peer", dm({ dmScope: "per-peer", peerId: "UserX" }), "agent:main:direct:userx"],
    [
      "empty channel → unknown",
      dm({ channel: "", dmScope: "per-channel-peer" }),
      "agent:main:unknown:direct:111",
    ],
    // ':' inside ids is kept
    [
      "matrix-style room id with ':'",
      dm({ channel: "matrix", chatType: "channel", peerId: "!room:example.org" }),
      "agent:main:matrix:channel:!room:example.org",
    ],
    [
      "peer id with ':' in a DM",
      dm({ dmScope: "per-channel-peer", peerId: "a:b" }),
      "agent:main:telegram:direct:a:b",
    ],
    // identity links
    [
      "identity link, channel:peer entry",
      dm({ dmScope: "per-peer", identityLinks: links }),
      "agent:main:direct:alice",
    ],
    [
      "identity link entries compare case-insensitively",
      dm({ dmScope: "per-channel-peer", channel: "discord", peerId: "222", identityLinks: links }),
      "agent:main:discord:direct:alice",
    ],
    [
      "identity link, bare peer entry matches any channel",
      dm({ dmScope: "per-channel-peer", channel: "whatsapp", peerId: "333", identityLinks: links }),
      "agent:main:whatsapp:direct:bob",
    ],
    [
      "identity link scoped to another channel does not apply",
      dm({ dmScope: "per-peer", channel: "discord", peerId: "111", identityLinks: links }),
      "agent:main:direct:111",
    ],
    ["identity links not applied in main scope", dm({ identityLinks: links }), "agent:main:main"],
    [
      "identity links not applied to groups",
      dm({ chatType: "group", peerId: "111", identityLinks: links }),
      "agent:main:telegram:group:111",
    ],
    [
      "identity link, per-account-channel-peer",
      dm({ dmScope: "per-account-channel-peer", accountId: "B", identityLinks: links }),
      "agent:main:telegram:b:direct:alice",
    ],
    // global scope: everything shares the main bucket
    ["global scope, per-peer dm", dm({ dmScope: "per-peer", scope: "global" }), "agent:main:main"],
    ["global scope, group", dm({ chatType: "group", peerId: "g", scope: "global" }), "agent:main:main"],
    [
      "global scope, thread",
      dm({ chatType: "channel", peerId: "c", threadId: "t", scope: "global" }),
      "agent:main:main",
    ],
    [
      "per-sender scope is the normal path",
      dm({ dmScope: "per-peer", scope: "per-sender" }),
      "agent:main:direct:111",
    ],
  ];

  it.each(rows)("%s", (_name, input, expected) => {
    expect(buildSessionKey(input)).toBe(expected);
  });

  it.each([
    ["invalid agent id", dm({ agentId: "bad id" }), "agentId"],
    ["empty agent id", dm({ agentId: " " }), "agentId"],
    ["channel containing ':'", dm({ channel: "tele:gram", dmScope: "per-channel-peer" }), "channel"],
    ["account containing ':'", dm({ dmScope: "per-account-channel-peer", accountId: "a:b" }), "accountId"],
  ])("rejects %s with INVALID_PARAMS naming the field", (_name, input, field) => {
    try {
      buildSessionKey(input);
      expect.unreachable("should throw");
    } catch (err) {
      expect(err).toBeInstanceOf(SwitchboardError);
      expect((err as SwitchboardError).code).toBe("INVALID_PARAMS");
      expect((err as SwitchboardError).message).toContain(field);
    }
  });
});

describe("parse(build(x)) round trips", () => {
  const cases: Array<[string, BuildSessionKeyInput, Partial<ParsedSessionKey>]> = [
    [
      "per-peer",
      dm({ dmScope: "per-peer", peerId: "U1" }),
      { agentId: "main", chatType: "direct", peerId: "u1" },
    ],
    [
      "per-channel-peer",
      dm({ agentId: "ops", dmScope: "per-channel-peer", channel: "Discord", peerId: "42" }),
      { agentId: "ops", channel: "discord", chatType: "direct", peerId: "42" },
    ],
    [
      "per-account-channel-peer",
      dm({ dmScope: "per-account-channel-peer", channel: "slack", accountId: "Work", peerId: "U9" }),
      { agentId: "main", channel: "slack", accountId: "work", chatType: "direct", peerId: "u9" },
    ],
    [
      "group",
      dm({ chatType: "group", peerId: "-100" }),
      { agentId: "main", channel: "telegram", chatType: "group", peerId: "-100" },
    ],
    [
      "channel with ':' in id",
      dm({ channel: "matrix", chatType: "channel", peerId: "!r:ex.org" }),
      { channel: "matrix", chatType: "channel", peerId: "!r:ex.org" },
    ],
    [
      "thread",
      dm({ channel: "slack", chatType: "channel", peerId: "C1", threadId: "171.5" }),
      {
        channel: "slack",
        chatType: "channel",
        peerId: "c1",
        threadId: "171.5",
        parentKey: "agent:main:slack:channel:c1",
      },
    ],
    [
      "thread id with ':'",
      dm({ channel: "slack", chatType: "channel", peerId: "C1", threadId: "a:b" }),
      { peerId: "c1", threadId: "a:b", parentKey: "agent:main:slack:channel:c1" },
    ],
    [
      "topic",
      dm({ chatType: "group", peerId: "-1001", topicId: "7" }),
      { chatType: "group", peerId: "-1001", topicId: "7", groupKey: "agent:main:telegram:group:-1001" },
    ],
    [
      "topic + thread",
      dm({ chatType: "group", peerId: "-1001", topicId: "7", threadId: "9" }),
      { peerId: "-1001", topicId: "7", threadId: "9", parentKey: "agent:main:telegram:group:-1001:topic:7" },
    ],
    ["main bucket", dm({}), { agentId: "main", rest: "main" }],
  ];

  it.each(cases)("%s", (_name, input, expected) => {
    const key = buildSessionKey(input);
    const parsed = parseSessionKey(key);
    expect(parsed).toMatchObject({ key, ...expected });
    if (!expected.threadId) expect(parsed.threadId).toBeUndefined();
    if (!expected.topicId) expect(parsed.topicId).toBeUndefined();
  });

  it("sub-agent keys round-trip", () => {
    const uuid = "0b4f6c0e-5b7a-4d3c-9e2f-1a2b3c4d5e6f";
    expect(parseSessionKey(subagentKey("Ops", uuid))).toMatchObject({
      agentId: "ops",
      rest: `subagent:${uuid}`,
    });
  });
});

describe("parseSessionKey", () => {
  const rows: Array<[string, string, Partial<ParsedSessionKey>, Array<keyof ParsedSessionKey>]> = [
    [
      "thread of a thread: last :thread: wins, chat is before the first",
      "agent:a:slack:channel:c1:thread:t1:thread:t2",
      { threadId: "t2", parentKey: "agent:a:slack:channel:c1:thread:t1", peerId: "c1", channel: "slack" },
      [],
    ],
    [
      "agent named thread is not a thread",
      "agent:thread:main",
      { agentId: "thread", rest: "main" },
      ["threadId"],
    ],
    ["agent named topic is not a topic", "agent:topic:main", { agentId: "topic", rest: "main" }, ["topicId"]],
    [
      "empty thread id is not a thread",
      "agent:a:slack:channel:c1:thread:",
      { peerId: "c1:thread:" },
      ["threadId"],
    ],
    [
      "upper case and whitespace",
      "  AGENT:Main:Slack:Channel:C1  ",
      { key: "agent:main:slack:channel:c1", peerId: "c1" },
      [],
    ],
    ["legacy dm segment", "agent:a:direct:u1", { chatType: "direct", peerId: "u1" }, ["channel"]],
    [
      "legacy 'dm' chat type",
      "agent:a:telegram:dm:u1",
      { chatType: "direct", channel: "telegram", peerId: "u1" },
      [],
    ],
    [
      "un-prefixed legacy group key",
      "discord:group:123",
      { channel: "discord", chatType: "group", peerId: "123" },
      ["agentId"],
    ],
    ["cron key", "cron:nightly", { rest: "cron:nightly" }, ["agentId", "chatType"]],
    [
      "agent-scoped cron",
      "agent:a:cron:nightly:run:1",
      { agentId: "a", rest: "cron:nightly:run:1" },
      ["chatType"],
    ],
    ["hook key", "hook:abc", { rest: "hook:abc" }, ["agentId"]],
    ["invalid agent id: not agent-scoped", "agent:-bad:main", { rest: "agent:-bad:main" }, ["agentId"]],
    ["missing rest", "agent:a", { rest: "agent:a" }, ["agentId"]],
    ["main key", "agent:a:main", { agentId: "a", rest: "main" }, ["chatType", "peerId", "channel"]],
    [
      "account segment only for direct",
      "agent:a:slack:acct:group:g",
      { agentId: "a" },
      ["chatType", "peerId", "channel", "accountId"],
    ],
  ];

  it.each(rows)("%s", (_name, key, expected, absent) => {
    const parsed = parseSessionKey(key);
    expect(parsed).toMatchObject(expected);
    for (const field of absent) expect(parsed[field]).toBeUndefined();
  });
});

describe("classifyKind", () => {
  it.each([
    ["agent:main:main", "main"],
    ["AGENT:Main:MAIN", "main"],
    ["agent:ops:main", "main"],
    ["cron:job1", "cron"],
    ["agent:main:cron:job1", "cron"],
    ["agent:main:cron:job1:run:abc", "cron"],
    ["hook:0b4f6c0e-5b7a-4d3c-9e2f-1a2b3c4d5e6f", "hook"],
    ["agent:main:hook:x", "hook"],
    ["node-abc", "node"],
    ["node:abc", "node"],
    ["agent:main:node-abc", "node"],
    ["agent:main:telegram:group:-100", "group"],
    ["agent:main:slack:channel:c1", "group"],
    ["agent:main:slack:channel:c1:thread:1.2", "group"],
    ["agent:main:telegram:group:-100:topic:5", "group"],
    ["discord:group:1", "group"],
    ["agent:main:x:y:z:group:1", "group"],
    ["agent:main:direct:u1", "other"],
    ["agent:main:telegram:direct:u1", "other"],
    ["agent:main:telegram:default:direct:u1", "other"],
    ["agent:main:direct:weird:group:id", "other"],
    ["agent:main:subagent:0b4f6c0e-5b7a-4d3c-9e2f-1a2b3c4d5e6f", "other"],
    ["agent:main:main:thread:t1", "other"],
    ["something", "other"],
  ])("%s → %s", (key, kind) => {
    expect(classifyKind(key)).toBe(kind);
  });
});

describe("deriveChannel", () => {
  it.each([
    ["cron:x", { channel: "telegram" }, "internal"],
    ["agent:a:hook:x", undefined, "internal"],
    ["node-1", { lastChannel: "slack" }, "internal"],
    ["agent:a:main", { channel: "Telegram", lastChannel: "slack" }, "telegram"],
    ["agent:a:main", { lastChannel: "slack" }, "slack"],
    ["agent:a:main", { channel: " ", lastChannel: "slack" }, "slack"],
    ["agent:a:discord:group:1", {}, "discord"],
    ["agent:a:discord:group:1", { channel: "webchat" }, "webchat"],
    ["agent:a:slack:direct:u1", undefined, "slack"],
    ["agent:a:main", undefined, "unknown"],
    ["agent:a:direct:u1", {}, "unknown"],
    ["agent:a:subagent:0b4f6c0e-5b7a-4d3c-9e2f-1a2b3c4d5e6f", {}, "unknown"],
  ])("%s %j → %s", (key, entry, channel) => {
    expect(deriveChannel(key, entry)).toBe(channel);
  });
});

describe("reserved and thread keys", () => {
  it.each([
    ["global", true],
    ["unknown", true],
    [" GLOBAL ", true],
    ["agent:main:global", true],
    ["agent:ops:unknown", true],
    ["agent:main:main", false],
    ["agent:main:global:thread:1", false],
    ["globalx", false],
    ["agent:main:telegram:group:unknown", false],
  ])("isReservedKey(%j) = %s", (key, reserved) => {
    expect(isReservedKey(key)).toBe(reserved);
  });

  it.each([
    ["agent:a:slack:channel:c1:thread:1.5", true],
    ["agent:a:slack:channel:c1:THREAD:X", true],
    ["agent:a:slack:channel:c1", false],
    ["agent:a:telegram:group:-1:topic:3", false],
    ["agent:thread:main", false],
    ["agent:a:slack:channel:c1:thread:", false],
  ])("isThreadKey(%j) = %s", (key, thread) => {
    expect(isThreadKey(key)).toBe(thread);
  });
});

describe("normalizeKeyInput", () => {
  const caller = { agentId: "Ops", sessionKey: "Agent:Ops:Telegram:Direct:U1" };
  it.each([
    ["main", { kind: "key", key: "agent:ops:main" }],
    [" MAIN ", { kind: "key", key: "agent:ops:main" }],
    ["current", { kind: "key", key: "agent:ops:telegram:direct:u1" }],
    [
      "0B4F6C0E-5B7A-4D3C-9E2F-1A2B3C4D5E6F",
      { kind: "sessionId", id: "0b4f6c0e-5b7a-4d3c-9e2f-1a2b3c4d5e6f" },
    ],
    ["agent:main:slack:channel:C1", { kind: "key", key: "agent:main:slack:channel:c1" }],
    ["cron:nightly", { kind: "key", key: "cron:nightly" }],
    ["custom-key", { kind: "key", key: "custom-key" }],
  ])("%j → %j", (input, expected) => {
    expect(normalizeKeyInput(input, caller)).toEqual(expected);
  });

  it.each([
    ["", "empty"],
    ["   ", "empty"],
    ["global", "reserved"],
    ["unknown", "reserved"],
    ["agent:ops:global", "reserved"],
    ["agent:bad id:main", "malformed"],
    ["agent:x", "malformed"],
    ["a\u0000b", "control"],
    ["k".repeat(1025), "too long"],
  ])("%j is an error mentioning %s", (input, word) => {
    const r = normalizeKeyInput(input, caller);
    expect(r.kind).toBe("error");
    if (r.kind === "error") expect(r.error).toContain(word);
  });
});

describe("displayKey", () => {
  it.each([
    ["agent:main:main", "main", "main"],
    ["AGENT:MAIN:MAIN", "Main", "main"],
    ["agent:ops:main", "main", "agent:ops:main"],
    ["agent:main:direct:u1", "main", "agent:main:direct:u1"],
    ["agent:main:main:thread:1", "main", "agent:main:main:thread:1"],
  ])("%s as seen by %s → %s", (key, caller, shown) => {
    expect(displayKey(key, caller)).toBe(shown);
  });
});

describe("other key builders", () => {
  it("pins the exact shapes", () => {
    expect(mainKey(" Ops ")).toBe("agent:ops:main");
    expect(subagentKey("Main", "0B4F6C0E-5B7A-4D3C-9E2F-1A2B3C4D5E6F")).toBe(
      "agent:main:subagent:0b4f6c0e-5b7a-4d3c-9e2f-1a2b3c4d5e6f",
    );
    expect(cronKey(" Nightly ")).toBe("cron:nightly");
    expect(hookKey("github-push")).toBe("hook:github-push");
    expect(nodeKey("Pi4")).toBe("node-pi4");
  });

  it("generates fresh v4 UUIDs for sub-agents and hooks", () => {
    const a = subagentKey("main");
    const b = subagentKey("main");
    expect(a).not.toBe(b);
    expect(a.slice("agent:main:subagent:".length)).toMatch(UUID_V4_RE);
    expect(hookKey().slice("hook:".length)).toMatch(UUID_V4_RE);
  });

  it.each([
    [
      "sub-agent with a non-v4 uuid",
      () => subagentKey("main", "0b4f6c0e-5b7a-1d3c-9e2f-1a2b3c4d5e6f"),
      "uuid",
    ],
    ["sub-agent with garbage", () => subagentKey("main", "nope"), "uuid"],
    ["sub-agent with a bad agent", () => subagentKey("Bad Agent"), "agentId"],
    ["empty cron job", () => cronKey(" "), "jobId"],
    ["empty hook id", () => hookKey(""), "hookId"],
    ["empty node id", () => nodeKey(""), "nodeId"],
  ])("rejects %s", (_name, fn, field) => {
    expect(fn).toThrowError(
      expect.objectContaining({ code: "INVALID_PARAMS", message: expect.stringContaining(field) }),
    );
  });
});

describe("normalizeAgentId", () => {
  it.each([
    [" Main ", "main"],
    ["a", "a"],
    ["ops_team-2", "ops_team-2"],
    ["9lives", "9lives"],
    ["a".repeat(64), "a".repeat(64)],
  ])("%j → %j", (input, out) => {
    expect(normalizeAgentId(input)).toBe(out);
  });

  it.each(["", " ", "-lead", "_x", "has space", "dot.ted", "a".repeat(65), "ümlaut"])(
    "rejects %j",
    (input) => {
      expect(() => normalizeAgentId(input)).toThrowError(
        expect.objectContaining({
          code: "INVALID_PARAMS",
          message: expect.stringContaining(JSON.stringify(input)),
        }),
      );
    },
  );
});

describe("parseSessionKey, kept for keys parsed lately", () => {
  it("answers the same parts for the same raw key every time, shared and frozen", () => {
    const raw = "  Agent:Main:Telegram:Group:-100123:topic:7  ";
    const first = parseSessionKey(raw);
    expect(first).toEqual({
      key: "agent:main:telegram:group:-100123:topic:7",
      agentId: "main",
      rest: "telegram:group:-100123:topic:7",
      topicId: "7",
      groupKey: "agent:main:telegram:group:-100123",
      channel: "telegram",
      chatType: "group",
      peerId: "-100123",
    });
    expect(parseSessionKey(raw)).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(() => {
      (first as { agentId?: string }).agentId = "other";
    }).toThrow(TypeError);
    expect(parseSessionKey(raw).agentId).toBe("main");
    // a different raw key is parsed on its own
    expect(parseSessionKey("agent:ops:main").agentId).toBe("ops");
    // far more keys than are kept: each still parses right
    for (let i = 0; i < 10_000; i++)
      expect(parseSessionKey(`agent:a${i % 97}:x${i}`).agentId).toBe(`a${i % 97}`);
    expect(parseSessionKey(raw)).toEqual(first);
  });
});
