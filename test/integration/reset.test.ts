import { existsSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/channels/types.js";
import type { ConfigInput } from "../../src/config/index.js";
import { statusCard } from "../../src/policy/status-card.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { contentText, echoHandler, type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { memoryInbound, startTestApp, type TestApp } from "../harness.js";

/**
 * Session resets by command (`/new`, `/reset`), by RPC and by `session.reset` policy on a fake
 * clock, and `/compact` from a chat: driven with inbound messages through the real router.
 */

let fake: OpenAIFake;
let t: TestApp | undefined;
let clock = new Date(2026, 11, 1, 10, 0).getTime(); // local time: policies use the host's clock

beforeAll(async () => {
  fake = await startOpenAIFake();
});
afterAll(async () => {
  await fake.close();
});
afterEach(async () => {
  fake.setDefault(echoHandler);
  await t?.stop();
  t = undefined;
});

const KEY = "agent:main:main";

async function setup(overrides: Partial<ConfigInput> = {}) {
  t = await startTestApp(
    {
      models: {
        default: "fake/m1",
        providers: { fake: { kind: "openai", baseUrl: fake.url, timeoutMs: 5000, maxRetries: 0 } },
      },
      tools: { profile: "minimal", alsoAllow: ["sessions_history"] },
      ...overrides,
    },
    { now: () => clock },
  );
  const ch = new MemoryChannel("memory", "default");
  (t.app.services.channels as unknown as { add(a: MemoryChannel): void }).add(ch);
  return { app: t, ch };
}

let seq = 0;
function msg(p: Partial<InboundMessage> & { text: string }): InboundMessage {
  return memoryInbound({ messageId: `m${++seq}`, ...p });
}

async function say(app: TestApp, text: string, p: Partial<InboundMessage> = {}) {
  const r = await app.app.router.handle(msg({ text, ...p }));
  if (r.runId) await app.app.services.pipeline.wait(r.runId, 10_000);
  return r;
}

const sessionIdOf = async (app: TestApp, key = KEY) =>
  (await app.app.services.store.sessions.get(key))?.sessionId;

describe("reset by command", () => {
  it("/new starts a new sessionId for the same key; the old transcript stays readable by its sessionId", async () => {
    const { app, ch } = await setup();
    await say(app, "remember the code 4711");
    const oldId = await sessionIdOf(app);
    const oldPath = app.app.services.store.transcripts.locate({ agentId: "main", sessionId: oldId ?? "" });

    const r = await say(app, "/new");
    expect(r).toMatchObject({ accepted: false, dropped: "session-command" });
    expect(ch.texts().at(-1)).toBe("Started a new session. The previous conversation is archived.");
    const entry = await app.app.services.store.sessions.get(KEY);
    expect(entry?.sessionId).not.toBe(oldId);
    expect(entry?.previousSessionId).toBe(oldId);

    const before = fake.chatRequests().length;
    await say(app, "what was the code?");
    // The model no longer sees the old conversation.
    const sent = fake
      .chatRequests()
      .slice(before)[0]
      ?.body.messages?.slice(1)
      .map((m) => contentText(m.content));
    expect(sent).toEqual(["what was the code?"]);

    // Archived, not destroyed: the file is there and sessions_history reads it by its sessionId.
    expect(existsSync(oldPath)).toBe(true);
    const old = await app.rpc("sessions.history", { sessionKey: oldId });
    expect(old.result.messages.map((m: { content: string }) => m.content)).toEqual([
      "remember the code 4711",
      "remember the code 4711",
    ]);
    const tool = await app.invoke(KEY, "sessions_history", { sessionKey: oldId });
    expect(tool.messages).toHaveLength(2);
    const current = await app.rpc("sessions.history", { sessionKey: KEY });
    expect(current.result.messages.map((m: { content: string }) => m.content)).toEqual([
      "what was the code?",
      "what was the code?",
    ]);
  });

  it("channels.<name>.commands: owners-only refuses others; off passes the text to the model", async () => {
    const { app } = await setup({
      channels: {
        telegram: {
          accounts: {},
          owners: ["7"],
          allowFrom: ["42"],
          commands: { reset: "owners", compact: "off" },
        },
      },
    });
    const tg = { channel: "telegram", senderId: "42", peerId: "42" };
    await say(app, "hi", tg);
    const key = "agent:main:main";
    const id = await sessionIdOf(app, key);
    expect(await say(app, "/reset", tg)).toMatchObject({ dropped: "command-from-non-owner" });
    expect(await sessionIdOf(app, key)).toBe(id);
    const before = fake.chatRequests().length;
    const r = await say(app, "/compact", tg);
    expect(r.accepted).toBe(true);
    expect(contentText(fake.chatRequests()[before]?.body.messages?.at(-1)?.content)).toBe("/compact");
    await say(app, "/reset", { channel: "telegram", senderId: "7", peerId: "7" });
    expect(await sessionIdOf(app, key)).not.toBe(id);
  });

  it("in a denied chat /new and /reset still start a new session but get no reply (SEMANTICS §2)", async () => {
    const { app } = await setup({
      channels: { telegram: { accounts: {}, owners: ["7"], allowFrom: ["42"] } },
    });
    const ch = new MemoryChannel("telegram", "default");
    (app.app.services.channels as unknown as { add(a: MemoryChannel): void }).add(ch);
    const user = { channel: "telegram", senderId: "42", peerId: "42" };
    const owner = { channel: "telegram", senderId: "7", peerId: "7" };
    await say(app, "hi", user);
    await say(app, "/send off", owner);
    const posted = ch.sent.length;
    const id = await sessionIdOf(app);
    expect(await say(app, "/new", user)).toMatchObject({ dropped: "session-command" });
    const afterNew = await sessionIdOf(app);
    expect(afterNew).not.toBe(id);
    await say(app, "/reset", user);
    expect(await sessionIdOf(app)).not.toBe(afterNew);
    expect(ch.sent.length).toBe(posted);
    // Owner commands still answer there; once sending is back on, /new confirms again.
    await say(app, "/send on", owner);
    expect(ch.texts().at(-1)).toBe("Sending is on for this chat.");
    await say(app, "/new", user);
    expect(ch.texts().at(-1)).toBe("Started a new session. The previous conversation is archived.");
  });

  it("sessions.reset over RPC answers the new row and the previous sessionId", async () => {
    const { app } = await setup();
    await say(app, "hello");
    const oldId = await sessionIdOf(app);
    const r = await app.rpc("sessions.reset", { sessionKey: "main" });
    expect(r.ok).toBe(true);
    expect(r.result.previousSessionId).toBe(oldId);
    expect(r.result.entry).toMatchObject({ key: KEY, sessionId: await sessionIdOf(app) });
    expect(r.result.entry.sessionId).not.toBe(oldId);
    const missing = await app.rpc("sessions.reset", { sessionKey: "agent:main:nope" });
    expect(missing.error?.code).toBe("NOT_FOUND");
    expect((await app.rpc("sessions.reset", {})).error?.message).toMatch(/sessionKey/);
    // a malformed key is an input error, as in every sessions.* method
    const malformed = await app.rpc("sessions.reset", { sessionKey: "agent:main" });
    expect(malformed.error).toMatchObject({ code: "INVALID_PARAMS" });
    expect(malformed.error?.message).toContain("malformed session key");
  });
});

describe("reset policies, applied when the next message arrives", () => {
  it("daily at atHour: a session started before the last 04:00 starts over; the status card says when", async () => {
    clock = new Date(2026, 11, 1, 10, 0).getTime();
    const { app } = await setup({ session: { reset: { mode: "daily", atHour: 4 } } });
    await say(app, "morning");
    const first = await sessionIdOf(app);
    const card = await statusCard(
      app.app.services,
      (await app.app.services.store.sessions.get(KEY)) ?? (undefined as never),
    );
    expect(card).toContain(`Session started: ${new Date(clock).toISOString()}`);
    expect(card).toContain(`resets at ${new Date(2026, 11, 2, 4, 0).toISOString()} (daily at 04:00)`);
    // The last prompt's real size, as the provider reported it (the fake reports about chars / 4).
    const row = await app.app.services.store.sessions.get(KEY);
    expect(row?.contextTokens).toBeGreaterThan(0);
    const shown =
      (row?.contextTokens ?? 0) < 1000
        ? String(row?.contextTokens)
        : `${((row?.contextTokens ?? 0) / 1000).toFixed(1)}k`;
    expect(card).toContain(`Last prompt: ${shown} tokens`);

    clock = new Date(2026, 11, 2, 3, 59).getTime();
    await say(app, "late night");
    expect(await sessionIdOf(app)).toBe(first);
    clock = new Date(2026, 11, 2, 4, 1).getTime();
    await say(app, "new day");
    expect(await sessionIdOf(app)).not.toBe(first);
    const hist = await app.rpc("sessions.history", { sessionKey: KEY });
    expect(hist.result.messages[0].content).toBe("new day");
  });

  it("idle per channel and per chat type; only inbound messages count as activity", async () => {
    clock = new Date(2026, 11, 1, 10, 0).getTime();
    const { app } = await setup({
      session: {
        reset: {
          mode: "off",
          byChatType: { group: { mode: "idle", idleMinutes: 60 } },
          byChannel: { memory: { mode: "idle", idleMinutes: 30 } },
        },
      },
    });
    await say(app, "one");
    const first = await sessionIdOf(app);
    clock += 29 * 60_000;
    await say(app, "two");
    expect(await sessionIdOf(app)).toBe(first);
    // An operator turn is not an inbound message: it does not extend the idle time.
    clock += 20 * 60_000;
    await app.rpc("chat.send", { sessionKey: KEY, message: "operator", timeoutSeconds: 10 });
    clock += 11 * 60_000;
    await say(app, "three");
    expect(await sessionIdOf(app)).not.toBe(first);

    // byChannel beats byChatType: a group on another channel follows the group rule (60 min).
    const group = {
      channel: "slack",
      chatType: "group" as const,
      peerId: "C1",
      senderId: "u2",
      wasMentioned: true,
    };
    await say(app, "g1", group);
    const gkey =
      (await app.app.services.store.sessions.list({})).find((e) => e.key.includes("slack"))?.key ?? "";
    const g1 = await sessionIdOf(app, gkey);
    clock += 45 * 60_000;
    await say(app, "g2", group);
    expect(await sessionIdOf(app, gkey)).toBe(g1);
    clock += 61 * 60_000;
    await say(app, "g3", group);
    expect(await sessionIdOf(app, gkey)).not.toBe(g1);
  });
});

describe("/compact from a chat", () => {
  it("summarises on demand with the given focus and answers in the chat", async () => {
    const { app, ch } = await setup();
    fake.setDefault((r) =>
      contentText(r.body.messages?.[0]?.content).startsWith("You compact a chat transcript")
        ? { text: "SUMMARY" }
        : echoHandler(r),
    );
    for (const w of ["a", "b", "c", "d", "e"]) await say(app, `turn ${w}`);
    const before = fake.chatRequests().length;
    const r = await say(app, "/compact keep the ticket ids");
    expect(r.dropped).toBe("session-command");
    await app.app.services.pipeline.wait(`compact:memory:default:m${seq}`, 10_000);
    const reqs = fake.chatRequests().slice(before);
    expect(reqs).toHaveLength(1);
    const prompt = contentText(reqs[0]?.body.messages?.[1]?.content);
    expect(prompt).toContain("Focus on: keep the ticket ids");
    expect(prompt).toContain("User: turn a");
    expect(prompt).not.toContain("turn b"); // keepLastTurns (4) stay verbatim
    expect(ch.texts().at(-1)).toMatch(/^Compacted 2 older messages into a summary/);
    const tail = await app.app.services.store.transcripts.readTail(
      { agentId: "main", sessionId: (await sessionIdOf(app)) ?? "" },
      { limit: 50, includeTools: true },
    );
    expect(tail.filter((m) => m.role === "compaction")).toHaveLength(1);
    expect(tail.some((m) => m.content === "/compact keep the ticket ids")).toBe(false);
    // The next turn sees the summary.
    await say(app, "next");
    expect(contentText(fake.chatRequests().at(-1)?.body.messages?.[0]?.content)).toContain("SUMMARY");
  });

  it("the summary's model call counts against the budgets, as a turn's call does", async () => {
    const { app } = await setup({
      models: {
        default: "fake/m1",
        providers: {
          fake: {
            kind: "openai",
            baseUrl: fake.url,
            timeoutMs: 5000,
            maxRetries: 0,
            models: { m1: { price: { inputPerMTok: 1, outputPerMTok: 1 } } },
          },
        },
      },
      usage: { budgets: [{ scope: "agent:main", period: "day", maxCostUsd: 100, action: "warn" }] },
    });
    const spent = async () =>
      (await app.rpc("usage.get", { scope: "agent:main", period: "day" })).result.budget.spent
        .costUsd as number;
    fake.setDefault((r) =>
      contentText(r.body.messages?.[0]?.content).startsWith("You compact a chat transcript")
        ? { text: "SUMMARY", usage: { prompt: 600_000, completion: 400_000 } } // $1
        : { ...echoHandler(r), usage: { prompt: 10, completion: 10 } },
    );
    for (const w of ["a", "b", "c", "d", "e"]) await say(app, `turn ${w}`);
    const before = await spent();
    await say(app, "/compact");
    await app.app.services.pipeline.wait(`compact:memory:default:m${seq}`, 10_000);
    expect((await app.app.services.store.sessions.get(KEY))?.compactionCount).toBe(1);
    expect((await spent()) - before).toBeCloseTo(1, 6);
  });

  it("a /compact that fails says so in the chat and changes nothing", async () => {
    const { app, ch } = await setup();
    for (const w of ["a", "b", "c", "d", "e"]) await say(app, `turn ${w}`);
    fake.setDefault((r) =>
      contentText(r.body.messages?.[0]?.content).startsWith("You compact a chat transcript")
        ? { status: 500, error: "down" }
        : echoHandler(r),
    );
    await say(app, "/compact");
    await app.app.services.pipeline.wait(`compact:memory:default:m${seq}`, 10_000);
    expect(ch.texts().at(-1)).toMatch(/^Compaction failed: .*; the conversation continues unchanged\.$/);
    expect((await app.app.services.store.sessions.get(KEY))?.compactionCount).toBeUndefined();
  });
});
