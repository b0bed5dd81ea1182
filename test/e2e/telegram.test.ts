import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeTelegram } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/** The whole gateway with the real grammY adapter against the loopback Bot API. */

const OWNER = { id: 42, is_bot: false, first_name: "Olivia" };
const STRANGER = { id: 77, is_bot: false, first_name: "Sam" };
const GROUP = { id: -1001, type: "supergroup" as const, title: "Team" };
const FORUM = { id: -1002, type: "supergroup" as const, title: "Forum", is_forum: true };
const LONG = Array.from({ length: 4000 }, (_, i) => `word${i}`).join(" ");

let tg: FakeTelegram;
let t: TestApp;

beforeAll(async () => {
  tg = await FakeTelegram.start();
  t = await startTestApp(
    {
      models: {
        default: "s/echo",
        providers: {
          s: {
            kind: "scripted",
            rules: [
              { match: "^long$", reply: LONG },
              {
                match: "^spawn (.+)$",
                toolCalls: [{ name: "sessions_spawn", args: { task: "$1" } }],
                afterTools: "spawned",
              },
              { match: "\\[Subagent Task\\]: (.+)$", reply: "child result: $1" },
              {
                match: "research (.+)$",
                toolCalls: [{ name: "sessions_spawn", args: { task: "$1", thread: true } }],
                afterTools: "started a topic",
              },
              { match: "^more (.+)$", reply: "child heard: $1" },
            ],
          },
        },
      },
      tools: { profile: "full" },
      channels: {
        telegram: {
          accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } },
          owners: [String(OWNER.id)],
          // These tests are about delivery; DM pairing has its own test (pairing.test.ts).
          allowFrom: ["*"],
        },
      },
    },
    { listen: true },
  );
});

afterAll(async () => {
  await t?.stop();
  await tg?.close();
});

const sent = (chatId: number) => tg.sentMessages().filter((m) => m.chat_id === String(chatId));

describe("telegram through the gateway", () => {
  it("a DM is answered in the same chat and lands in the main session", async () => {
    tg.pushMessage({ id: OWNER.id, type: "private" }, OWNER, { text: "hello bot" });
    const reply = await eventually(() => sent(OWNER.id).find((m) => m.text.includes("hello bot")), 500, 20);
    expect(reply.text).toContain("You said: hello bot");
    const entry = await t.app.services.store.sessions.get("agent:main:main");
    expect(entry?.deliveryContext).toMatchObject({
      channel: "telegram",
      to: String(OWNER.id),
      accountId: "default",
    });
  });

  it("a group message is answered only when the bot is mentioned", async () => {
    tg.pushMessage(GROUP, STRANGER, { text: "chatter without mention" });
    const mention = "@switchboard_test_bot ping";
    tg.pushMessage(GROUP, STRANGER, {
      text: mention,
      entities: [{ type: "mention", offset: 0, length: "@switchboard_test_bot".length }],
    });
    await eventually(() => sent(GROUP.id).find((m) => m.text.includes("ping")), 500, 20);
    expect(sent(GROUP.id).some((m) => m.text.includes("chatter"))).toBe(false);
    expect(await t.app.services.store.sessions.get("agent:main:telegram:group:-1001")).not.toBeNull();
  });

  it("a forum topic gets its own session and the reply lands in the topic", async () => {
    tg.pushMessage(FORUM, STRANGER, {
      text: "@switchboard_test_bot in topic",
      message_thread_id: 55,
      is_topic_message: true,
      entities: [{ type: "mention", offset: 0, length: "@switchboard_test_bot".length }],
    });
    const reply = await eventually(() => sent(FORUM.id).find((m) => m.text.includes("in topic")), 500, 20);
    expect(reply.message_thread_id).toBe(55);
    expect(
      await t.app.services.store.sessions.get("agent:main:telegram:group:-1002:topic:55"),
    ).not.toBeNull();
  });

  it("/send off from an owner silences the chat, a stranger's /send changes nothing, /send inherit restores", async () => {
    const dmOwner = { id: OWNER.id, type: "private" as const };
    tg.pushMessage(dmOwner, OWNER, { text: "/send off" });
    await eventually(() => sent(OWNER.id).find((m) => m.text.includes("Sending is off")), 500, 20);
    expect((await t.app.services.store.sessions.get("agent:main:main"))?.sendPolicy).toBe("deny");

    const before = sent(OWNER.id).length;
    const u = tg.pushMessage(dmOwner, OWNER, { text: "are you there?" });
    await tg.waitConfirmed(u);
    // A stranger's command in their own DM is ignored silently.
    const s = tg.pushMessage({ id: STRANGER.id, type: "private" }, STRANGER, { text: "/send on" });
    await tg.waitConfirmed(s);
    tg.pushMessage(dmOwner, OWNER, { text: "/send inherit" });
    await eventually(() => sent(OWNER.id).find((m) => m.text.includes("default policy")), 500, 20);
    expect(
      sent(OWNER.id)
        .slice(before)
        .some((m) => m.text.includes("are you there")),
    ).toBe(false);
    expect(sent(STRANGER.id)).toHaveLength(0);
    expect((await t.app.services.store.sessions.get("agent:main:main"))?.sendPolicy).toBeUndefined();

    tg.pushMessage(dmOwner, OWNER, { text: "back again" });
    await eventually(() => sent(OWNER.id).find((m) => m.text.includes("back again")), 500, 20);
  });

  it("/tools from an owner lists the session's tools and what was removed; a stranger gets nothing", async () => {
    const dmOwner = { id: OWNER.id, type: "private" as const };
    tg.pushMessage(dmOwner, OWNER, { text: "/tools" });
    const reply = await eventually(() => sent(OWNER.id).find((m) => m.text.startsWith("Tools for")), 500, 20);
    expect(reply.text).toContain("Tools for agent:main:main: sessions_list, sessions_history");
    expect(reply.text).not.toContain("Removed:");
    const s = tg.pushMessage({ id: STRANGER.id, type: "private" }, STRANGER, { text: "/tools" });
    await tg.waitConfirmed(s);
    expect(sent(STRANGER.id)).toHaveLength(0);
  });

  it("a redelivered update is not answered twice", async () => {
    const chat = { id: 901, type: "private" as const };
    const from = { id: 901, is_bot: false, first_name: "Rita" };
    const msg = { message_id: 424242, date: 1_700_000_000, chat, from, text: "only once please" };
    const u1 = tg.pushUpdate({ message: msg });
    await tg.waitConfirmed(u1);
    const u2 = tg.pushUpdate({ message: msg });
    await tg.waitConfirmed(u2);
    await eventually(() => sent(901).find((m) => m.text.includes("only once")), 500, 20);
    tg.pushMessage(chat, from, { text: "next" });
    await eventually(() => sent(901).find((m) => m.text.includes("next")), 500, 20);
    expect(sent(901).filter((m) => m.text.includes("only once"))).toHaveLength(1);
  });

  it("a 4,000-word reply arrives as several well-formed chunks; a 429 is retried after retry_after", async () => {
    const chat = { id: 902, type: "private" as const };
    tg.failNext("sendMessage", 429, "Too Many Requests: retry after 1", 1);
    tg.pushMessage(chat, { id: 902, is_bot: false, first_name: "Lee" }, { text: "long" });
    const chunks = await eventually(
      () => {
        const got = sent(902);
        return got
          .map((m) => m.text)
          .join(" ")
          .includes("word3999")
          ? got
          : null;
      },
      1000,
      20,
    );
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) expect(c.text.length).toBeLessThanOrEqual(4096);
    const words = chunks.flatMap((c) => c.text.split(/\s+/)).filter((w) => w.startsWith("word"));
    expect(words).toHaveLength(4000);
    expect(tg.calls.some((c) => c.method === "sendMessage" && c.ok === false)).toBe(true);
  });

  it("a spawned sub-agent's completion lands in the chat it was spawned from", async () => {
    const chat = { id: 903, type: "private" as const };
    tg.pushMessage(chat, { id: 903, is_bot: false, first_name: "Kim" }, { text: "spawn count the stars" });
    const announce = await eventually(
      () => sent(903).find((m) => m.text.includes("child result: count the stars")),
      1000,
      20,
    );
    expect(announce.text).toMatch(/Status: ok/);
  });

  it("a forum topic binds to a thread-bound sub-agent: completion in the new topic, follow-ups reach the child", async () => {
    const mention = { type: "mention", offset: 0, length: "@switchboard_test_bot".length };
    tg.pushMessage(FORUM, STRANGER, {
      text: "@switchboard_test_bot research coral",
      message_thread_id: 77,
      is_topic_message: true,
      entities: [mention],
    });
    const topicCall = await eventually(
      () => tg.calls.find((c) => c.method === "createForumTopic" && c.ok),
      500,
      20,
    );
    expect(String(topicCall.payload.chat_id)).toBe(String(FORUM.id));
    const done = await eventually(
      () => sent(FORUM.id).find((m) => m.text.includes("child result: coral")),
      1000,
      20,
    );
    const topicId = done.message_thread_id;
    expect(topicId).toBeDefined();
    expect(topicId).not.toBe(77);
    // No mention needed inside the bound topic; the child session answers.
    tg.pushMessage(FORUM, STRANGER, {
      text: "more about reefs",
      message_thread_id: topicId,
      is_topic_message: true,
    });
    const reply = await eventually(
      () => sent(FORUM.id).find((m) => m.text.includes("child heard: about reefs")),
      1000,
      20,
    );
    expect(reply.message_thread_id).toBe(topicId);
  });
});
