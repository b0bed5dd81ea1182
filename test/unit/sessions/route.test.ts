import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/load.js";
import { sendDecision } from "../../../src/policy/access.js";
import { routeOf } from "../../../src/sessions/route.js";
import type { SessionEntry } from "../../../src/store/types.js";

const entry = (over: Partial<SessionEntry>): SessionEntry => ({
  key: "agent:main:telegram:group:-100",
  sessionId: "s1",
  agentId: "main",
  createdAt: 0,
  updatedAt: 0,
  ...over,
});

describe("routeOf: where a session replies, one answer for delivery and the send policy", () => {
  it("is the delivery context, else the last channel and chat, else nowhere", () => {
    const ctx = { channel: "slack", to: "C1", threadId: "t" };
    expect(routeOf(entry({ deliveryContext: ctx, lastChannel: "telegram", lastTo: "-100" }))).toEqual(ctx);
    expect(
      routeOf(entry({ lastChannel: "telegram", lastTo: "-100", lastAccountId: "b", lastThreadId: "9" })),
    ).toEqual({ channel: "telegram", to: "-100", accountId: "b", threadId: "9" });
    expect(routeOf(entry({ lastChannel: "telegram" }))).toBeNull();
  });

  it("the send policy judges the channel delivery would post into", () => {
    const deps = {
      config: parseConfig({
        session: { sendPolicy: { rules: [{ match: { channel: "telegram" }, action: "deny" }] } },
      }),
    };
    // the session began elsewhere (channel) but now replies in Telegram (last route): denied
    const moved = entry({ channel: "webchat", lastChannel: "telegram", lastTo: "-100" });
    expect(sendDecision(deps, moved).action).toBe("deny");
    // an explicit route (delivery's request) is judged instead
    expect(sendDecision(deps, moved, { channel: "slack" }).action).toBe("allow");
    // no route at all: the session's own channel
    expect(sendDecision(deps, entry({ channel: "telegram" })).action).toBe("deny");
  });
});
