import { afterEach, describe, expect, it, vi } from "vitest";
import type { ConfigInput } from "../../../src/config/index.js";
import type { SessionRow } from "../../../src/sessions/rows.js";
import { startTestApp, type TestApp } from "../../harness.js";
import { say, seedChild, seedSession } from "./seed-sessions.js";

/** sessions_list through tools.invoke (SEMANTICS.md §3), sessions seeded through the store. */

const SECRET = "sk-live0123456789abcdefghijklmnopqrstuv";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

async function start(overrides: Partial<ConfigInput> = {}): Promise<TestApp> {
  t = await startTestApp(overrides);
  return t;
}

type ListResult = { count: number; sessions: SessionRow[]; messagesTruncated?: boolean };
const list = (app: TestApp, key: string, args: Record<string, unknown> = {}) =>
  app.invoke<ListResult>(key, "sessions_list", args);
const keys = (r: ListResult) => r.sessions.map((s) => s.key);

describe("sessions_list: rows and display keys", () => {
  it("shows the caller's main bucket as `main`, newest first, with the API row shape", async () => {
    const app = await start();
    const main = await seedSession(app, "agent:main:main", {
      ageMs: 5_000,
      channel: "telegram",
      deliveryContext: { channel: "telegram", to: "42", accountId: "default" },
      label: "home",
      totalTokens: 1200,
      sendPolicy: "deny",
    });
    const child = await seedChild(app, main, { ageMs: 1_000, label: "researcher" });
    const r = await list(app, "agent:main:main");
    expect(r.count).toBe(r.sessions.length);
    expect(Object.keys(r).sort()).toEqual(["count", "sessions"]);
    expect(keys(r)).toEqual([child.key, "main"]);
    const [c, m] = r.sessions as [SessionRow, SessionRow];
    // spawnedBy uses the same display form, so it can be passed straight back to the tools.
    expect(c).toMatchObject({ kind: "other", agentId: "main", spawnedBy: "main", label: "researcher" });
    expect(m).toMatchObject({
      key: "main",
      kind: "main",
      channel: "telegram",
      sessionId: main.sessionId,
      label: "home",
      totalTokens: 1200,
      sendPolicy: "deny",
      deliveryContext: { channel: "telegram", to: "42", accountId: "default" },
      updatedAt: main.updatedAt,
    });
    expect(typeof m.transcriptPath).toBe("string");
    expect(m.messages).toBeUndefined();
    // The displayed key is accepted back by the other tools.
    const h = await app.invoke("agent:main:main", "sessions_history", { sessionKey: m.key });
    expect(h.sessionKey).toBe("main");
  });

  it("another agent's main bucket keeps its full key", async () => {
    const app = await start({
      agents: { list: [{ id: "main" }, { id: "ops" }] },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: [] } },
    });
    await seedSession(app, "agent:main:main");
    await seedSession(app, "agent:ops:main");
    const r = await list(app, "agent:ops:main");
    expect(keys(r).sort()).toEqual(["agent:main:main", "main"]);
  });

  it("never lists reserved keys", async () => {
    const app = await start({ tools: { sessions: { visibility: "all" } } });
    await seedSession(app, "agent:main:main");
    for (const k of ["global", "unknown", "agent:main:global", "agent:main:unknown"]) {
      await seedSession(app, k, { agentId: "main", label: "reserved" });
    }
    const r = await list(app, "agent:main:main");
    expect(keys(r)).toEqual(["main"]);
    expect((await list(app, "agent:main:main", { label: "reserved" })).count).toBe(0);
  });

  it('with session.scope "global" sub-agents and cron sessions are still listed, and `global` is main', async () => {
    const app = await start({ session: { scope: "global" }, tools: { sessions: { visibility: "agent" } } });
    const main = await seedSession(app, "agent:main:main", { ageMs: 10_000 });
    const child = await seedChild(app, main, { ageMs: 5_000 });
    await seedSession(app, "cron:nightly", { agentId: "main", ageMs: 1_000 });
    const expected = ["cron:nightly", child.key, "main"];
    expect(keys(await list(app, "agent:main:main"))).toEqual(expected);
    // `global` is accepted as the caller key and as a target, and shown as `main`.
    expect(keys(await list(app, "global"))).toEqual(expected);
    const h = await app.invoke("agent:main:main", "sessions_history", { sessionKey: "global" });
    expect(h.sessionKey).toBe("main");
    expect((await app.invoke("global", "session_status", {})).sessionKey).toBe("main");
  });

  it('with session.scope "global" and tree visibility the caller sees its own sub-agents', async () => {
    const app = await start({ session: { scope: "global" } });
    const main = await seedSession(app, "agent:main:main", { ageMs: 10_000 });
    const child = await seedChild(app, main, { ageMs: 5_000 });
    await seedSession(app, "agent:main:telegram:group:g1");
    expect(keys(await list(app, "main"))).toEqual([child.key, "main"]);
  });

  it('without scope "global" the key `global` stays reserved', async () => {
    const app = await start();
    await seedSession(app, "agent:main:main");
    const h = await app
      .invoke("agent:main:main", "sessions_history", { sessionKey: "global" })
      .catch((e) => e);
    expect(JSON.stringify(h)).toContain("reserved");
  });
});

describe("sessions_list: filters", () => {
  async function seeded() {
    const app = await start({ tools: { sessions: { visibility: "agent" } } });
    await seedSession(app, "agent:main:main", { ageMs: 3 * 3_600_000 });
    await seedSession(app, "agent:main:discord:group:g1", {
      ageMs: 60_000,
      label: "Alpha",
      displayName: "Ops Room",
    });
    await seedSession(app, "agent:main:slack:channel:c9", { ageMs: 120_000, label: "alpha" });
    await seedSession(app, "agent:main:telegram:direct:bob", { ageMs: 180_000, label: "Alpha2" });
    await seedSession(app, "cron:nightly", { agentId: "main", ageMs: 240_000 });
    return app;
  }

  it("kinds: unknown kinds are ignored, none left means no kind filter", async () => {
    const app = await seeded();
    const all = await list(app, "agent:main:main");
    expect(all.count).toBe(5);
    expect(keys(await list(app, "agent:main:main", { kinds: ["group"] }))).toEqual([
      "agent:main:discord:group:g1",
      "agent:main:slack:channel:c9",
    ]);
    expect(keys(await list(app, "agent:main:main", { kinds: ["GROUP", "bogus"] }))).toHaveLength(2);
    expect(keys(await list(app, "agent:main:main", { kinds: ["cron", "main"] }))).toEqual([
      "cron:nightly",
      "main",
    ]);
    expect(await list(app, "agent:main:main", { kinds: ["bogus", "nope"] })).toEqual(all);
    const cron = (await list(app, "agent:main:main", { kinds: ["cron"] })).sessions[0];
    expect(cron?.channel).toBe("internal");
  });

  it("label is exact, search is a case-insensitive substring of key, label and display name", async () => {
    const app = await seeded();
    expect(keys(await list(app, "agent:main:main", { label: "Alpha" }))).toEqual([
      "agent:main:discord:group:g1",
    ]);
    expect((await list(app, "agent:main:main", { label: " Alpha" })).count).toBe(0);
    expect(keys(await list(app, "agent:main:main", { search: "ALPHA" }))).toHaveLength(3);
    expect(keys(await list(app, "agent:main:main", { search: "ops room" }))).toEqual([
      "agent:main:discord:group:g1",
    ]);
    expect(keys(await list(app, "agent:main:main", { search: "SLACK:CHANNEL" }))).toEqual([
      "agent:main:slack:channel:c9",
    ]);
    // Search text is literal, not a pattern.
    expect((await list(app, "agent:main:main", { search: ".*" })).count).toBe(0);
  });

  it("activeMinutes keeps rows updated within N minutes", async () => {
    const app = await seeded();
    expect(keys(await list(app, "agent:main:main", { activeMinutes: 2.5 }))).toEqual([
      "agent:main:discord:group:g1",
      "agent:main:slack:channel:c9",
    ]);
    expect((await list(app, "agent:main:main", { activeMinutes: 60 })).count).toBe(4);
    expect((await list(app, "agent:main:main", { activeMinutes: 240 })).count).toBe(5);
  });

  it("agentId narrows to one agent (upper-case and padding tolerated)", async () => {
    const app = await start({
      agents: { list: [{ id: "main" }, { id: "ops" }] },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: [] } },
    });
    await seedSession(app, "agent:main:main");
    await seedSession(app, "agent:ops:main");
    await seedSession(app, "agent:ops:slack:channel:c1");
    const r = await list(app, "agent:main:main", { agentId: "  OPS " });
    expect(keys(r).sort()).toEqual(["agent:ops:main", "agent:ops:slack:channel:c1"]);
    expect(r.sessions.every((s) => s.agentId === "ops")).toBe(true);
    expect((await list(app, "agent:main:main", { agentId: "nobody" })).count).toBe(0);
  });

  it("limit defaults to 50 and is clamped to 1..200, never rejected in range", async () => {
    const app = await start({ tools: { sessions: { visibility: "agent" } } });
    await seedSession(app, "agent:main:main");
    for (let i = 0; i < 210; i++)
      await seedSession(app, `agent:main:telegram:direct:u${i}`, { ageMs: i + 1 });
    expect((await list(app, "agent:main:main")).count).toBe(50);
    expect((await list(app, "agent:main:main", { limit: 1000 })).count).toBe(200);
    expect((await list(app, "agent:main:main", { limit: 0 })).count).toBe(1);
    expect((await list(app, "agent:main:main", { limit: 2.9 })).count).toBe(2);
    await expect(list(app, "agent:main:main", { limit: -1 })).rejects.toMatchObject({
      code: "INVALID_PARAMS",
    });
    await expect(list(app, "agent:main:main", { limit: "10" })).rejects.toMatchObject({
      code: "INVALID_PARAMS",
    });
    await expect(list(app, "agent:main:main", { bogus: 1 })).rejects.toMatchObject({
      code: "INVALID_PARAMS",
    });
  });
});

describe("sessions_list: messageLimit", () => {
  it("adds the last N messages, tool calls/results removed, secrets redacted, clamped to 20", async () => {
    const app = await start();
    const main = await seedSession(app, "agent:main:main");
    for (let i = 0; i < 24; i++) await say(app, main, i % 2 ? "assistant" : "user", `m${i}`);
    await say(app, main, "user", `my key is ${SECRET}`);
    await say(app, main, "toolCall", { name: "sessions_list", arguments: {} }, { toolCallId: "c1" });
    await say(app, main, "toolResult", { result: "secret tool output" }, { toolCallId: "c1" });
    await say(app, main, "assistant", "<think>plan quietly</think>Noted.");

    const r = await list(app, "agent:main:main", { messageLimit: 2 });
    const msgs = r.sessions[0]?.messages ?? [];
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(msgs[1]?.content).toBe("Noted.");
    const json = JSON.stringify(r);
    expect(json).not.toContain(SECRET);
    expect(json).toContain("sk-liv…stuv");
    expect(json).not.toContain("secret tool output");
    expect(json).not.toContain("plan quietly");

    const many = await list(app, "agent:main:main", { messageLimit: 500 });
    expect(many.sessions[0]?.messages).toHaveLength(20);
    expect((await list(app, "agent:main:main", { messageLimit: 0 })).sessions[0]?.messages).toBeUndefined();
    await expect(list(app, "agent:main:main", { messageLimit: -1 })).rejects.toMatchObject({
      code: "INVALID_PARAMS",
    });
  });

  it("caps each message at 4,000 characters", async () => {
    const app = await start();
    const main = await seedSession(app, "agent:main:main");
    await say(app, main, "user", "x".repeat(10_000));
    const r = await list(app, "agent:main:main", { messageLimit: 1 });
    const content = r.sessions[0]?.messages?.[0]?.content;
    expect(typeof content).toBe("string");
    expect((content as string).length).toBeLessThanOrEqual(4000);
    expect(content as string).toContain("truncated");
  });
});

describe("sessions_list: total size of messages", () => {
  it("keeps the newest rows' messages within 256 KiB and marks the rest", async () => {
    const app = await start({ tools: { sessions: { visibility: "agent" } } });
    await seedSession(app, "agent:main:main", { ageMs: 100_000 });
    for (let i = 0; i < 12; i++) {
      const s = await seedSession(app, `agent:main:big${i}`, { ageMs: 1_000 * (12 - i) });
      // 20 messages of ~3,900 chars: ~80 KiB of view per row.
      for (let j = 0; j < 20; j++) await say(app, s, "user", `${i}:${j}:${"y".repeat(3900)}`);
    }
    const r = await list(app, "agent:main:main", { messageLimit: 20 });
    expect(r.messagesTruncated).toBe(true);
    const withMessages = r.sessions.filter((row) => (row.messages?.length ?? 0) > 0);
    const omitted = r.sessions.filter((row) => (row as { messagesOmitted?: boolean }).messagesOmitted);
    expect(withMessages.length).toBeGreaterThan(0);
    expect(omitted.length).toBeGreaterThan(0);
    // The newest rows keep theirs; the omitted ones come after them.
    expect(r.sessions.indexOf(withMessages.at(-1)!)).toBeLessThan(r.sessions.indexOf(omitted[0]!));
    const total = withMessages.reduce((n, row) => n + Buffer.byteLength(JSON.stringify(row.messages)), 0);
    expect(total).toBeLessThanOrEqual(256 * 1024);
  });
});

describe("sessions_list: visibility is row by row and leaves no trace", () => {
  it("a tree caller sees itself and its descendants only; neighbours leave no trace", async () => {
    // maxSpawnDepth 2: a depth-1 child keeps sessions_list.
    const app = await start({ agents: { defaults: { subagents: { maxSpawnDepth: 2 } } } });
    const main = await seedSession(app, "agent:main:main", { ageMs: 60_000 });
    const child = await seedChild(app, main, { ageMs: 50_000 });
    const grandchild = await seedChild(app, child, { ageMs: 40_000 });
    const before = await list(app, "agent:main:main");
    expect(keys(before).sort()).toEqual([child.key, grandchild.key, "main"].sort());

    // Neighbours (newer than everything above) must not change the caller's result at all.
    await seedSession(app, "agent:main:telegram:direct:bob", { label: "secret-neighbour" });
    const stranger = await seedSession(app, "agent:main:discord:group:g7");
    await seedChild(app, stranger);
    const after = await list(app, "agent:main:main");
    expect(after).toEqual(before);
    expect(await list(app, "agent:main:main", { search: "bob" })).toEqual({ count: 0, sessions: [] });
    expect(await list(app, "agent:main:main", { label: "secret-neighbour" })).toEqual({
      count: 0,
      sessions: [],
    });
    expect(await list(app, "agent:main:main", { search: "no-such-session" })).toEqual({
      count: 0,
      sessions: [],
    });

    // The child sees itself and its own child, not its parent.
    expect(keys(await list(app, child.key)).sort()).toEqual([child.key, grandchild.key].sort());
  });

  it("a tree caller gets `limit` visible rows even when many newer invisible rows come first", async () => {
    const app = await start();
    const main = await seedSession(app, "agent:main:main", { ageMs: 10 * 60_000 });
    for (let i = 0; i < 60; i++) await seedChild(app, main, { ageMs: 5 * 60_000 + i });
    for (let i = 0; i < 300; i++) await seedSession(app, `agent:main:telegram:direct:n${i}`, { ageMs: i });
    const r = await list(app, "agent:main:main", { limit: 50 });
    expect(r.count).toBe(50);
    expect(r.sessions.every((s) => s.spawnedBy === "main")).toBe(true);
    // Newest first among the visible rows.
    const times = r.sessions.map((s) => s.updatedAt);
    expect([...times].sort((a, b) => b - a)).toEqual(times);
  });

  it("cross-agent rows through an allow list: invisible agents are skipped, limit still filled", async () => {
    const app = await start({
      agents: { list: [{ id: "main" }, { id: "ops" }, { id: "hr" }] },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "ops"] } },
    });
    await seedSession(app, "agent:main:main", { ageMs: 10 * 60_000 });
    for (let i = 0; i < 12; i++)
      await seedSession(app, `agent:ops:slack:channel:c${i}`, { ageMs: 5 * 60_000 + i });
    for (let i = 0; i < 150; i++) await seedSession(app, `agent:hr:telegram:direct:p${i}`, { ageMs: i });
    const r = await list(app, "agent:main:main", { limit: 10 });
    expect(r.count).toBe(10);
    expect(r.sessions.every((s) => s.agentId === "ops")).toBe(true);
    expect((await list(app, "agent:main:main", { agentId: "hr" })).count).toBe(0);
  });
});

describe("sessions_list: derived titles and last-message previews", () => {
  it("includeDerivedTitles: the first user message, sanitised, at most 60 chars; absent unless asked", async () => {
    const app = await start();
    const main = await seedSession(app, "agent:main:main", { ageMs: 1_000 });
    await say(app, main, "assistant", "Welcome! How can I help?");
    await say(
      app,
      main,
      "user",
      `Plan   the\nlaunch party for Friday with GITHUB_TOKEN=abc and a very long tail of words`,
    );
    await say(app, main, "user", "second question");
    const child = await seedChild(app, main);
    const r = await list(app, "main", { includeDerivedTitles: true });
    const row = r.sessions.find((s) => s.key === "main")!;
    expect(row.derivedTitle).toBe("Plan the launch party for Friday with GITHUB_TOKEN=*** and…");
    expect(row.derivedTitle!.length).toBeLessThanOrEqual(60);
    // A session without a user message has no title.
    expect(r.sessions.find((s) => s.key === child.key)?.derivedTitle).toBeUndefined();
    expect((await list(app, "main")).sessions[0]?.derivedTitle).toBeUndefined();
  });

  it("includeLastMessage: the newest user/assistant message, normalised and redacted, at most 200 chars", async () => {
    const app = await start();
    const main = await seedSession(app, "agent:main:main");
    await say(app, main, "user", "what is the key?");
    const last = await say(
      app,
      main,
      "assistant",
      `<think>secret plan</think>Here: ${SECRET} ${"z".repeat(300)}`,
    );
    await say(app, main, "toolResult", "tool output is never the preview", {
      toolName: "x",
      toolCallId: "1",
    });
    const r = await list(app, "main", { includeLastMessage: true });
    const lm = r.sessions[0]?.lastMessage;
    expect(lm).toMatchObject({ role: "assistant", at: last.timestamp });
    expect(lm?.text.startsWith("Here: sk-liv…")).toBe(true);
    expect(lm?.text).not.toContain("secret plan");
    expect(lm?.text).not.toContain(SECRET);
    expect(lm?.text.length).toBeLessThanOrEqual(200);
    expect((await list(app, "main")).sessions[0]?.lastMessage).toBeUndefined();
  });

  it("reads transcripts only for the rows returned, never for invisible or cut-off ones", async () => {
    const app = await start({ tools: { sessions: { visibility: "agent" } } });
    for (let i = 0; i < 30; i++) {
      const e = await seedSession(app, `agent:main:telegram:direct:p${i}`, { ageMs: i * 1000 });
      await say(app, e, "user", `hello ${i}`);
    }
    const other = await seedSession(app, "agent:ops:main");
    await say(app, other, "user", "invisible");
    const tr = app.app.services.store.transcripts;
    const heads = vi.spyOn(tr, "readHead");
    const tails = vi.spyOn(tr, "readTail");
    const r = await list(app, "agent:main:telegram:direct:p0", {
      limit: 3,
      includeDerivedTitles: true,
      includeLastMessage: true,
    });
    expect(r.count).toBe(3);
    expect(r.sessions.map((s) => s.derivedTitle)).toEqual(["hello 0", "hello 1", "hello 2"]);
    expect(heads).toHaveBeenCalledTimes(3);
    expect(tails).toHaveBeenCalledTimes(3);
    const readRefs = [...heads.mock.calls, ...tails.mock.calls].map(([ref]) => ref.sessionId);
    expect(readRefs).not.toContain(other.sessionId);
    heads.mockRestore();
    tails.mockRestore();
  });
});

describe("sessions.list (RPC): the same previews", () => {
  it("includeDerivedTitles and includeLastMessage", async () => {
    const app = await start();
    const main = await seedSession(app, "agent:main:main");
    await say(app, main, "user", "first thing");
    await say(app, main, "assistant", "last thing");
    const r = await app.rpc("sessions.list", { includeDerivedTitles: true, includeLastMessage: true });
    expect(r.result.sessions[0]).toMatchObject({
      derivedTitle: "first thing",
      lastMessage: { role: "assistant", text: "last thing" },
    });
  });
});
