import { describe, expect, it } from "vitest";
import { z } from "zod";
import { type A2AEnded, decideNext, speakerOf } from "../../../src/flows/a2a.js";
import type { A2AFlow } from "../../../src/pipeline/turn-meta.js";
import { sessionsSendArgs, sessionsSendTool } from "../../../src/tools/sessions-send.js";

/** Pure parts of sessions_send: its argument schema and the follow-up flow's decisions. */

describe("sessions_send arguments", () => {
  const parse = (v: unknown) => sessionsSendArgs.safeParse(v);

  it("needs exactly one of sessionKey and label", () => {
    const neither = parse({ message: "hi" });
    expect(neither.success).toBe(false);
    expect(neither.error?.issues[0]?.path).toEqual(["sessionKey"]);
    const both = parse({ sessionKey: "main", label: "x", message: "hi" });
    expect(both.success).toBe(false);
    expect(both.error?.issues[0]?.message).toContain("not both");
    expect(parse({ label: "x", message: "hi" }).success).toBe(true);
  });

  it("message is required and at most 32,000 characters", () => {
    expect(parse({ sessionKey: "main" }).error?.issues[0]?.path).toEqual(["message"]);
    expect(parse({ sessionKey: "main", message: "x".repeat(32_000) }).success).toBe(true);
    const long = parse({ sessionKey: "main", message: "x".repeat(32_001) });
    expect(long.success).toBe(false);
    expect(long.error?.issues[0]?.path).toEqual(["message"]);
  });

  it("timeoutSeconds defaults to 30, accepts 0 and rejects negatives", () => {
    expect(parse({ sessionKey: "main", message: "m" }).data?.timeoutSeconds).toBe(30);
    expect(parse({ sessionKey: "main", message: "m", timeoutSeconds: 0 }).data?.timeoutSeconds).toBe(0);
    expect(parse({ sessionKey: "main", message: "m", timeoutSeconds: -1 }).error?.issues[0]?.path).toEqual([
      "timeoutSeconds",
    ]);
  });

  it("timeoutSeconds has no upper bound in the schema (SEMANTICS §3: ≥ 0); the wait itself is capped", () => {
    expect(parse({ sessionKey: "main", message: "m", timeoutSeconds: 7200 }).data?.timeoutSeconds).toBe(7200);
  });

  it("is strict and normalises the label scope agentId", () => {
    expect(parse({ sessionKey: "main", message: "m", channel: "x" }).success).toBe(false);
    expect(parse({ label: "l", agentId: " Research ", message: "m" }).data?.agentId).toBe("research");
    expect(parse({ label: "l", agentId: "no spaces", message: "m" }).success).toBe(false);
  });

  it("the JSON schema the model sees makes neither target field required and documents them", () => {
    const json = z.toJSONSchema(sessionsSendArgs, { io: "input" }) as {
      required?: string[];
      properties: Record<string, { description?: string }>;
    };
    expect(json.required).toEqual(["message"]);
    for (const f of ["sessionKey", "label", "agentId", "message", "timeoutSeconds"]) {
      expect(json.properties[f]?.description, f).toBeTruthy();
    }
    expect(sessionsSendTool.description).toContain("fire-and-forget");
    expect(sessionsSendTool.description).toContain("label");
    expect(sessionsSendTool.description).toMatch(/not instructions from a user/);
  });
});

const flow = (over: Partial<A2AFlow> = {}): A2AFlow => ({
  primaryRunId: "p1",
  requesterKey: "agent:a:main",
  requesterAgentId: "a",
  requesterChannel: "webchat",
  targetKey: "agent:b:main",
  targetAgentId: "b",
  targetChannel: "telegram",
  originalMessage: "hello",
  maxTurns: 5,
  ...over,
});
const ended = (
  phase: A2AEnded["phase"],
  reply: string | undefined,
  over: Partial<A2AEnded> = {},
): A2AEnded => ({
  phase,
  runId: "r",
  status: "ok",
  ...(reply !== undefined ? { reply } : {}),
  ...over,
});
const state = { roundOneReply: "first", latestReply: "latest" };

describe("reply-back loop decisions", () => {
  it("the requester answers the target's first reply, then they alternate", () => {
    expect(decideNext(flow(), undefined, ended("primary", " hi "))).toEqual({
      kind: "turn",
      turn: 1,
      state: { roundOneReply: "hi", latestReply: "hi" },
    });
    expect([1, 2, 3, 4, 5].map(speakerOf)).toEqual([
      "requester",
      "target",
      "requester",
      "target",
      "requester",
    ]);
    expect(decideNext(flow(), state, ended("turn", "more", { turn: 2 }))).toEqual({
      kind: "turn",
      turn: 3,
      state: { roundOneReply: "first", latestReply: "more" },
    });
  });

  it("REPLY_SKIP stops only as the exact token after trimming", () => {
    expect(decideNext(flow(), state, ended("turn", "  REPLY_SKIP\n", { turn: 1 })).kind).toBe("announce");
    expect(decideNext(flow(), state, ended("turn", "REPLY_SKIP.", { turn: 1 })).kind).toBe("turn");
    expect(decideNext(flow(), state, ended("turn", "reply_skip", { turn: 1 })).kind).toBe("turn");
    // A skip keeps the last real reply for the announce step.
    const d = decideNext(flow(), state, ended("turn", "REPLY_SKIP", { turn: 1 }));
    expect(d).toMatchObject({ kind: "announce", state });
  });

  it("an empty or failed turn ends the loop but still announces", () => {
    expect(decideNext(flow(), state, ended("turn", "   ", { turn: 1 }))).toMatchObject({
      kind: "announce",
      state,
    });
    expect(decideNext(flow(), state, ended("turn", undefined, { turn: 1, status: "timeout" }))).toMatchObject(
      {
        kind: "announce",
      },
    );
  });

  it("stops after maxTurns turns, and runs none with 0 or for a self-send", () => {
    expect(decideNext(flow({ maxTurns: 2 }), state, ended("turn", "x", { turn: 1 })).kind).toBe("turn");
    expect(decideNext(flow({ maxTurns: 2 }), state, ended("turn", "x", { turn: 2 }))).toMatchObject({
      kind: "announce",
      state: { latestReply: "x" },
    });
    expect(decideNext(flow({ maxTurns: 0 }), undefined, ended("primary", "r")).kind).toBe("announce");
    const self = flow({ requesterKey: "agent:b:main", requesterAgentId: "b" });
    expect(decideNext(self, undefined, ended("primary", "r")).kind).toBe("announce");
  });

  it("a failed or empty primary run has no follow-up at all", () => {
    expect(decideNext(flow(), undefined, ended("primary", undefined, { status: "error" })).kind).toBe("done");
    expect(decideNext(flow(), undefined, ended("primary", "")).kind).toBe("done");
  });
});

describe("announce step decisions", () => {
  it("delivers the trimmed reply", () => {
    expect(decideNext(flow(), state, ended("announce", "  Summary for the chat \n"))).toEqual({
      kind: "deliver",
      text: "Summary for the chat",
    });
  });

  it("ANNOUNCE_SKIP, an empty reply or a failed step stay silent", () => {
    expect(decideNext(flow(), state, ended("announce", " ANNOUNCE_SKIP ")).kind).toBe("done");
    expect(decideNext(flow(), state, ended("announce", "")).kind).toBe("done");
    expect(decideNext(flow(), state, ended("announce", "text", { status: "error" })).kind).toBe("done");
    expect(decideNext(flow(), state, ended("announce", "ANNOUNCE_SKIP!")).kind).toBe("deliver");
  });
});
