import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionEntry } from "../../../src/store/types.js";
import { startTestApp, type TestApp } from "../../harness.js";
import { say, seedChild, seedSession } from "./seed-sessions.js";

/** sessions_history through tools.invoke, and the RPC sessions.history that shares its function. */

const SECRETS = {
  openai: "sk-proj0123456789abcdefghijklmnop",
  github: "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
  bearer: "eyJhbGciOiJIUzI1NiJ9.payload123.signature456",
  env: "hunter2-very-long-password-value",
};

let t: TestApp;
let main: SessionEntry;
let child: SessionEntry;
let neighbour: SessionEntry;
let thread: SessionEntry;

beforeAll(async () => {
  t = await startTestApp();
  main = await seedSession(t, "agent:main:main", { channel: "webchat" });
  await say(t, main, "user", "hello");
  await say(
    t,
    main,
    "assistant",
    "<think>secret plan</think>Hi! Use `<think>` tags like:\n```\n<think>x</think>\n```\nhere.",
  );
  await say(t, main, "toolCall", [{ type: "toolCall", id: "c1", name: "sessions_list", arguments: {} }], {
    toolCallId: "c1",
    toolName: "sessions_list",
  });
  await say(
    t,
    main,
    "toolResult",
    { count: 0, sessions: [] },
    { toolCallId: "c1", toolName: "sessions_list" },
  );
  await say(
    t,
    main,
    "user",
    `keys: ${SECRETS.openai} ${SECRETS.github} Authorization: Bearer ${SECRETS.bearer} DB_PASSWORD=${SECRETS.env}`,
  );
  await say(t, main, "assistant", "done", { usage: { input: 10, output: 5, cost: 0.01 } });

  child = await seedChild(t, main);
  await say(t, child, "user", "[Subagent Task]: research");
  neighbour = await seedSession(t, "agent:main:telegram:direct:bob");
  await say(t, neighbour, "user", "bob's private note: the vault code is 4411");
  thread = await seedSession(t, "agent:main:discord:channel:c1:thread:t1", { spawnedBy: main.key });
  await say(t, thread, "user", "thread message");
});

afterAll(async () => {
  await t?.stop();
});

describe("sessions_history: the view", () => {
  it("returns the newest messages without tool messages by default, flags and bytes", async () => {
    const r = await t.invoke("agent:main:main", "sessions_history", { sessionKey: "current" });
    expect(Object.keys(r).sort()).toEqual(
      [
        "bytes",
        "contentRedacted",
        "contentTruncated",
        "droppedMessages",
        "messages",
        "sessionKey",
        "truncated",
      ].sort(),
    );
    expect(r.sessionKey).toBe("main");
    expect(r.messages.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "user",
      "assistant",
    ]);
    expect(r.bytes).toBe(Buffer.byteLength(JSON.stringify(r.messages)));
    expect(r.droppedMessages).toBe(false);
    // usage/cost never leave through history
    expect(JSON.stringify(r)).not.toContain("cost");
  });

  it("includeTools adds tool calls and results; limit keeps the newest", async () => {
    const r = await t.invoke("main", "sessions_history", { sessionKey: "main", includeTools: true });
    expect(r.messages.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "toolCall",
      "toolResult",
      "user",
      "assistant",
    ]);
    const last2 = await t.invoke("main", "sessions_history", { sessionKey: "main", limit: 2 });
    expect(last2.messages.map((m: { content: unknown }) => m.content)).toEqual([
      expect.stringContaining("keys:"),
      "done",
    ]);
  });

  it("strips thinking from assistant text but leaves code untouched", async () => {
    const r = await t.invoke("main", "sessions_history", { sessionKey: "main" });
    const text = r.messages[1].content as string;
    expect(text).not.toContain("secret plan");
    expect(text).toContain("`<think>`");
    expect(text).toContain("```\n<think>x</think>\n```");
  });

  it("redacts credentials and says so", async () => {
    const r = await t.invoke("main", "sessions_history", { sessionKey: "main" });
    const json = JSON.stringify(r);
    for (const s of Object.values(SECRETS)) expect(json).not.toContain(s);
    expect(json).toContain("sk-pro…mnop");
    expect(r.contentRedacted).toBe(true);
    // The same transcript without the secret line is not flagged.
    const clean = await t.invoke("main", "sessions_history", { sessionKey: "main", limit: 1 });
    expect(clean.contentRedacted).toBe(false);
  });
});

describe("sessions_history: addressing", () => {
  it("accepts main, current, a sessionId and upper-case or padded keys", async () => {
    const viaKey = await t.invoke("agent:main:main", "sessions_history", { sessionKey: "agent:main:main" });
    for (const ref of [
      "main",
      "current",
      main.sessionId,
      "  AGENT:MAIN:MAIN  ",
      main.sessionId.toUpperCase(),
    ]) {
      const r = await t.invoke("agent:main:main", "sessions_history", { sessionKey: ref });
      expect(r).toEqual(viaKey);
    }
  });

  it("reads a visible thread key (threads are only refused as send targets)", async () => {
    const r = await t.invoke("main", "sessions_history", {
      sessionKey: "agent:main:discord:channel:c1:thread:t1",
    });
    expect(r.messages.map((m: { content: unknown }) => m.content)).toEqual(["thread message"]);
  });

  it("unknown keys and sessionIds are errors that point at sessions_list", async () => {
    const missingKey = await t.invoke("main", "sessions_history", {
      sessionKey: "agent:main:discord:group:nope",
    });
    expect(missingKey).toMatchObject({ status: "error" });
    expect(missingKey.error).toContain("sessions_list");
    const missingId = await t.invoke("main", "sessions_history", { sessionKey: randomUUID() });
    expect(missingId).toMatchObject({ status: "error" });
    expect(missingId.error).toContain("full key from sessions_list");
  });

  it("reserved keys are errors, never lookups", async () => {
    for (const ref of ["global", "unknown", "agent:main:global", " UNKNOWN "]) {
      const r = await t.invoke("main", "sessions_history", { sessionKey: ref });
      expect(r.status).toBe("error");
      expect(r.error).toContain("reserved");
    }
  });

  it("an invisible session is forbidden, names the setting and leaks no content or key", async () => {
    for (const ref of [neighbour.key, neighbour.sessionId]) {
      const r = await t.invoke("main", "sessions_history", { sessionKey: ref });
      expect(Object.keys(r).sort()).toEqual(["error", "sessionKey", "status"]);
      expect(r.status).toBe("forbidden");
      expect(r.error).toContain("tools.sessions.visibility");
      expect(r.sessionKey).toBe(ref);
      const json = JSON.stringify(r);
      expect(json).not.toContain("vault code");
      if (ref === neighbour.sessionId) expect(json).not.toContain("bob");
    }
    // A leaf sub-agent (default maxSpawnDepth 1) does not even have the tool.
    const up = await t
      .invoke(child.key, "sessions_history", { sessionKey: "agent:main:main" })
      .catch((e) => e);
    expect(up.code).toBe("FORBIDDEN");
  });

  it("schema violations are INVALID_PARAMS", async () => {
    for (const args of [
      {},
      { sessionKey: "main", limit: -1 },
      { sessionKey: "main", limit: "5" },
      { sessionKey: "main", extra: true },
      { sessionKey: 7 },
    ]) {
      await expect(t.invoke("main", "sessions_history", args)).rejects.toMatchObject({
        code: "INVALID_PARAMS",
      });
    }
    expect(
      (await t.invoke("main", "sessions_history", { sessionKey: "main", limit: 500 })).messages.length,
    ).toBe(4);
  });

  it.each([
    [0, 1],
    [1.5, 1],
    [2.9, 2],
    [501, 4],
    [1e9, 4],
  ])("an out-of-range limit %s is clamped to the server's bounds (%i messages)", async (limit, n) => {
    const r = await t.invoke("main", "sessions_history", { sessionKey: "main", limit });
    expect(r.messages).toHaveLength(n);
    const rpc = await t.rpc("sessions.history", { sessionKey: "main", limit });
    expect(rpc.result?.messages).toHaveLength(n);
  });
});

describe("sessions_history: bounds", () => {
  it("cuts text at 4,000 characters and keeps the newest messages within 80 KiB", async () => {
    const big = await seedSession(t, "agent:main:webchat:direct:big", { spawnedBy: main.key });
    await say(t, big, "user", "first and oldest");
    for (let i = 0; i < 40; i++) await say(t, big, "user", `${i}:`.padEnd(3_900, "y"));
    await say(t, big, "assistant", "z".repeat(20_000));
    const r = await t.invoke("main", "sessions_history", { sessionKey: big.key, limit: 100 });
    expect(r.truncated).toBe(true);
    expect(r.droppedMessages).toBe(true);
    expect(r.contentTruncated).toBe(true);
    expect(r.bytes).toBeLessThanOrEqual(80 * 1024);
    expect(r.bytes).toBe(Buffer.byteLength(JSON.stringify(r.messages)));
    const last = r.messages.at(-1);
    expect(last.content.length).toBeLessThanOrEqual(4000);
    expect(last.content).toContain("truncated");
    expect(JSON.stringify(r)).not.toContain("first and oldest");
    expect(r.messages.at(-2).content.startsWith("39:")).toBe(true);
  });

  it("one structured message too large even alone becomes a placeholder", async () => {
    const huge = await seedSession(t, "agent:main:webchat:direct:huge", { spawnedBy: main.key });
    const blocks = Array.from({ length: 40 }, (_, i) => ({ type: "text", text: `${i}`.padEnd(3_000, "q") }));
    await say(t, huge, "assistant", blocks);
    const r = await t.invoke("main", "sessions_history", { sessionKey: huge.key });
    expect(r.messages).toHaveLength(1);
    expect(r.messages[0].content).toBe("[sessions_history omitted: message too large]");
    expect(r.truncated).toBe(true);
  });
});

describe("RPC sessions.history shares the tool's function", () => {
  it("same view, full key, NOT_FOUND for a missing session", async () => {
    const rpc = await t.rpc("sessions.history", {
      sessionKey: "agent:main:main",
      includeTools: true,
      limit: 3,
    });
    const tool = await t.invoke("main", "sessions_history", {
      sessionKey: "main",
      includeTools: true,
      limit: 3,
    });
    expect(rpc.ok).toBe(true);
    expect({ ...rpc.result, sessionKey: "main" }).toEqual(tool);
    expect(rpc.result.sessionKey).toBe("agent:main:main");
    // The operator sees every session, also those invisible to a tree caller.
    const op = await t.rpc("sessions.history", { sessionKey: neighbour.key });
    expect(op.result.messages[0].content).toContain("vault code");
    expect(
      (await t.rpc("sessions.history", { sessionKey: "agent:main:slack:channel:none" })).error?.code,
    ).toBe("NOT_FOUND");
    expect((await t.rpc("sessions.history", { sessionKey: "main", limit: -1 })).error?.code).toBe(
      "INVALID_PARAMS",
    );
  });
});
