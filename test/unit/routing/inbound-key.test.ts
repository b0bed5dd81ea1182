import { describe, expect, it } from "vitest";
import { type InboundMessage, inboundMessageSchema } from "../../../src/channels/types.js";
import { type ConfigInput, parseConfig } from "../../../src/config/index.js";
import { inboundSessionKey } from "../../../src/routing/router.js";

/** The session key of an inbound message on a channel with several accounts (SEMANTICS §1 table). */

const twoAccounts = (session: ConfigInput["session"] = {}, bindings: ConfigInput["bindings"] = []) =>
  parseConfig({
    stateDir: "/tmp/unused",
    session,
    bindings,
    agents: { list: [{ id: "main" }, { id: "ops" }] },
    channels: {
      telegram: { accounts: { default: { token: "1:a" }, Work: { token: "2:b" } } },
    },
  });

const dm = (accountId: string): InboundMessage =>
  inboundMessageSchema.parse({
    channel: "telegram",
    accountId,
    chatType: "direct",
    peerId: "4242",
    senderId: "4242",
    messageId: "1",
    text: "hi",
  });

describe("inbound session keys with several accounts", () => {
  it('dmScope "main" (default): a DM to any account is the main bucket, bound or not', () => {
    expect(inboundSessionKey(twoAccounts(), dm("default")).sessionKey).toBe("agent:main:main");
    expect(inboundSessionKey(twoAccounts(), dm("Work")).sessionKey).toBe("agent:main:main");
    const bound = twoAccounts({}, [{ agentId: "ops", match: { channel: "telegram", accountId: "Work" } }]);
    expect(inboundSessionKey(bound, dm("Work")).sessionKey).toBe("agent:ops:main");
  });

  it("each dmScope gives its own shape; only per-account-channel-peer names the account (lower-cased)", () => {
    const key = (dmScope: "per-peer" | "per-channel-peer" | "per-account-channel-peer") =>
      inboundSessionKey(twoAccounts({ dmScope }), dm("Work")).sessionKey;
    expect(key("per-peer")).toBe("agent:main:direct:4242");
    expect(key("per-channel-peer")).toBe("agent:main:telegram:direct:4242");
    expect(key("per-account-channel-peer")).toBe("agent:main:telegram:work:direct:4242");
  });
});
