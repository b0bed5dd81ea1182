import { describe, expect, it } from "vitest";
import {
  chatTypeOfKey,
  evaluateSendPolicy,
  type SendPolicyInput,
  type SendPolicyRule,
} from "../../../src/policy/send-policy.js";

const GROUP = { key: "agent:main:telegram:group:-100" };
const DM = { key: "agent:main:slack:direct:u1" };

const allow = (match: SendPolicyRule["match"]): SendPolicyRule => ({ match, action: "allow" });
const deny = (match: SendPolicyRule["match"]): SendPolicyRule => ({ match, action: "deny" });

function run(over: Partial<SendPolicyInput>) {
  return evaluateSendPolicy({ rules: [], default: "allow", target: GROUP, ...over });
}

describe("evaluateSendPolicy", () => {
  it.each<[string, Partial<SendPolicyInput>, "allow" | "deny", string]>([
    // override
    ["override allow beats a matching deny", { override: "allow", rules: [deny({})] }, "allow", "override"],
    ["override deny beats a matching allow", { override: "deny", rules: [allow({})] }, "deny", "override"],
    ["override deny beats default allow", { override: "deny" }, "deny", "override"],
    ["override allow beats default deny", { override: "allow", default: "deny" }, "allow", "override"],
    // default
    ["no rules → default allow", {}, "allow", "default"],
    ["no rules → default deny", { default: "deny" }, "deny", "default"],
    ["no matching rule → default", { rules: [deny({ channel: "slack" })] }, "allow", "default"],
    // deny beats allow regardless of order
    ["allow then deny", { rules: [allow({}), deny({ channel: "telegram" })] }, "deny", "rules[1]"],
    ["deny then allow", { rules: [deny({ channel: "telegram" }), allow({})] }, "deny", "rules[0]"],
    [
      "allow matched, default deny",
      { rules: [allow({ channel: "telegram" })], default: "deny" },
      "allow",
      "rules[0]",
    ],
    // channel
    ["channel matches case-insensitively", { rules: [deny({ channel: " Telegram " })] }, "deny", "rules[0]"],
    [
      "explicit target channel wins over the key",
      { rules: [deny({ channel: "webchat" })], target: { ...GROUP, channel: "WebChat" } },
      "deny",
      "rules[0]",
    ],
    ["channel mismatch", { rules: [deny({ channel: "discord" })] }, "allow", "default"],
    [
      "channel unknown → no match",
      { rules: [deny({ channel: "slack" })], target: { key: "agent:main:main" } },
      "allow",
      "default",
    ],
    // chatType
    ["chatType from the key", { rules: [deny({ chatType: "group" })] }, "deny", "rules[0]"],
    ["chatType dm = direct (rule dm)", { rules: [deny({ chatType: "dm" })], target: DM }, "deny", "rules[0]"],
    [
      "chatType direct (rule direct)",
      { rules: [deny({ chatType: "direct" })], target: DM },
      "deny",
      "rules[0]",
    ],
    [
      "chatType dm = direct (target dm)",
      { rules: [deny({ chatType: "direct" })], target: { key: "agent:main:main", chatType: "dm" } },
      "deny",
      "rules[0]",
    ],
    ["chatType mismatch", { rules: [deny({ chatType: "channel" })] }, "allow", "default"],
    [
      "channel chat type from the key",
      { rules: [deny({ chatType: "channel" })], target: { key: "agent:main:slack:channel:c1:thread:1" } },
      "deny",
      "rules[0]",
    ],
    [
      "chatType unknown → no match",
      { rules: [deny({ chatType: "direct" })], target: { key: "agent:main:main" } },
      "allow",
      "default",
    ],
    // keyPrefix
    ["keyPrefix matches", { rules: [deny({ keyPrefix: "agent:main:telegram:" })] }, "deny", "rules[0]"],
    ["keyPrefix compared lower-cased", { rules: [deny({ keyPrefix: "AGENT:Main:" })] }, "deny", "rules[0]"],
    [
      "keyPrefix against a non-normalised key",
      { rules: [deny({ keyPrefix: "agent:main:" })], target: { key: " AGENT:MAIN:MAIN " } },
      "deny",
      "rules[0]",
    ],
    ["keyPrefix mismatch", { rules: [deny({ keyPrefix: "agent:ops:" })] }, "allow", "default"],
    // all given fields must match
    [
      "channel + chatType + keyPrefix all match",
      { rules: [deny({ channel: "telegram", chatType: "group", keyPrefix: "agent:main:" })] },
      "deny",
      "rules[0]",
    ],
    [
      "one field mismatches → no match",
      { rules: [deny({ channel: "telegram", chatType: "direct", keyPrefix: "agent:main:" })] },
      "allow",
      "default",
    ],
    ["empty match matches everything", { rules: [deny({})] }, "deny", "rules[0]"],
    [
      "narrow allow cannot rescue from a broad deny",
      { rules: [allow({ keyPrefix: "agent:main:telegram:group:-100" }), deny({ channel: "telegram" })] },
      "deny",
      "rules[1]",
    ],
    [
      "first matching allow is reported",
      { rules: [allow({ channel: "discord" }), allow({ chatType: "group" }), allow({})], default: "deny" },
      "allow",
      "rules[1]",
    ],
  ])("%s", (_name, input, action, reason) => {
    const d = run(input);
    expect(d.action).toBe(action);
    expect(d.reason).toContain(reason);
  });

  // Every order of the same four rules gives the same answer.
  const four = [
    allow({}),
    deny({ chatType: "group" }),
    allow({ channel: "telegram" }),
    deny({ channel: "slack" }),
  ];
  const perms = (xs: SendPolicyRule[]): SendPolicyRule[][] =>
    xs.length <= 1
      ? [xs]
      : xs.flatMap((x, i) => perms([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));
  it.each(perms(four).map((p, i) => [i, p] as const))("rule order %i: deny wins", (_i, rules) => {
    expect(run({ rules }).action).toBe("deny");
    expect(run({ rules, target: DM }).action).toBe("deny");
    expect(run({ rules, target: { key: "agent:main:discord:direct:x" } }).action).toBe("allow");
  });
});

describe("chatTypeOfKey", () => {
  it.each([
    ["agent:main:telegram:group:-1", "group"],
    ["agent:main:slack:channel:c1", "channel"],
    ["agent:main:slack:channel:c1:thread:9", "channel"],
    ["agent:main:direct:u1", "direct"],
    ["agent:main:telegram:direct:u1", "direct"],
    ["agent:main:telegram:acct:direct:u1", "direct"],
    ["agent:main:telegram:dm:u1", "direct"],
    ["agent:main:main", undefined],
    ["cron:x", undefined],
    ["agent:main:subagent:0b4f6c0e-5b7a-4d3c-9e2f-1a2b3c4d5e6f", undefined],
  ])("%s → %s", (key, type) => {
    expect(chatTypeOfKey(key)).toBe(type);
  });
});
