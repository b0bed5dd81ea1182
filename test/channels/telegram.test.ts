import { GrammyError } from "grammy";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toSwitchboardError } from "../../channels/telegram/errors.js";
import { createTelegramChannel, type TelegramChannel } from "../../channels/telegram/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { SwitchboardError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { type ChannelHarness, channelContract } from "../contract/channel.js";
import { FakeTelegram, type FakeUser } from "../fakes/telegram.js";
import { eventually } from "../helpers.js";

const SECRET = "hook-secret_123";
const ADA: FakeUser = { id: 4242, is_bot: false, first_name: "Ada", username: "ada" };
const DM = { id: 4242, type: "private" as const };
const GROUP = { id: -100123, type: "supergroup" as const, title: "Team" };
const FORUM = { id: -100777, type: "supergroup" as const, title: "Forum", is_forum: true };

function botUser(fake: FakeTelegram): FakeUser {
  return { id: fake.bot.id, is_bot: true, first_name: fake.bot.first_name, username: fake.bot.username };
}

function mentionOf(fake: FakeTelegram, text: string): Record<string, unknown> {
  const handle = `@${fake.bot.username}`;
  return { text: `${handle} ${text}`, entities: [{ type: "mention", offset: 0, length: handle.length }] };
}

function make(
  fake: FakeTelegram,
  mode: "polling" | "webhook",
  extra: Record<string, unknown> = {},
): TelegramChannel {
  return createTelegramChannel(
    {
      accountId: "default",
      token: fake.token,
      apiRoot: fake.apiRoot,
      mode,
      pollingTimeoutSeconds: 5,
      ...(mode === "webhook" ? { webhookSecret: SECRET } : {}),
      ...extra,
    },
    { logger: silentLogger() },
  );
}

/** Builds an update the way the fake would and feeds it in through the adapter's webhook. */
let webhookUpdateId = 1;
let webhookMessageId = 1;
async function postWebhook(
  adapter: TelegramChannel,
  chat: Record<string, unknown>,
  from: FakeUser | undefined,
  message: Record<string, unknown>,
): Promise<number> {
  const update = {
    update_id: webhookUpdateId++,
    message: {
      message_id: webhookMessageId++,
      date: 1_700_000_000,
      chat,
      ...(from ? { from } : {}),
      ...message,
    },
  };
  const res = await adapter.handleWebhook(
    { "x-telegram-bot-api-secret-token": SECRET },
    JSON.stringify(update),
  );
  return res.status;
}

async function harness(mode: "polling" | "webhook"): Promise<ChannelHarness> {
  const fake = await FakeTelegram.start();
  const adapter = make(fake, mode);
  const inject = async (chat: Record<string, unknown>, from: FakeUser, message: Record<string, unknown>) => {
    if (mode === "webhook") {
      const status = await postWebhook(adapter, chat, from, message);
      if (status !== 200) throw new Error(`webhook answered ${status}`);
      return;
    }
    // Waiting for the confirmation keeps injections in order, as the contract requires.
    const id = fake.pushMessage(chat as typeof GROUP, from, message);
    await fake.waitConfirmed(id);
  };
  return {
    adapter,
    injectDirect: (text) => inject(DM, ADA, { text }),
    injectGroup: (text, { mention }) => inject(GROUP, ADA, mention ? mentionOf(fake, text) : { text }),
    injectOwn: (text) => inject(DM, botUser(fake), { text }),
    sent: async () =>
      fake.sentMessages().map((m) => ({
        to: m.chat_id,
        text: m.text,
        ...(m.message_thread_id !== undefined ? { threadId: String(m.message_thread_id) } : {}),
      })),
    rateLimitNextSend: async (s) =>
      fake.failNext("sendMessage", 429, `Too Many Requests: retry after ${s}`, s),
    cleanup: () => fake.close(),
  };
}

channelContract("telegram (long polling)", () => harness("polling"));
channelContract("telegram (webhook)", () => harness("webhook"));

describe("telegram specifics", () => {
  let fake: FakeTelegram;
  let adapter: TelegramChannel;
  let inbound: InboundMessage[];
  const collect = async (m: InboundMessage): Promise<void> => {
    inbound.push(m);
  };
  const waitText = (needle: string): Promise<InboundMessage> =>
    eventually(() => inbound.find((m) => m.text.includes(needle)), 500);

  beforeEach(async () => {
    inbound = [];
    fake = await FakeTelegram.start();
    adapter = make(fake, "polling");
  });

  afterEach(async () => {
    await adapter.stop();
    await fake.close();
  });

  it("registers the owner commands on start", async () => {
    await adapter.start(collect);
    const call = await fake.waitForCall("setMyCommands");
    expect(call.payload.commands).toEqual([
      expect.objectContaining({ command: "status" }),
      expect.objectContaining({ command: "send" }),
    ]);
  });

  it("maps forum topics to topicId and sends back into the topic", async () => {
    await adapter.start(collect);
    const topicRoot = {
      message_id: 1,
      date: 1,
      chat: FORUM,
      from: botUser(fake),
      forum_topic_created: { name: "t" },
    };
    fake.pushMessage(FORUM, ADA, {
      text: "inside a topic",
      message_thread_id: 77,
      is_topic_message: true,
      reply_to_message: topicRoot,
    });
    const msg = await waitText("inside a topic");
    expect(msg).toMatchObject({
      chatType: "group",
      peerId: String(FORUM.id),
      topicId: "77",
      replyToBot: false,
    });
    expect(msg.threadId).toBeUndefined();

    await adapter.send({
      accountId: "default",
      to: msg.peerId,
      threadId: "77",
      text: "topic reply",
      format: "plain",
    });
    expect(fake.sentMessages().at(-1)).toMatchObject({ text: "topic reply", message_thread_id: 77 });
  });

  it("omits the General topic id when sending but keeps it for typing", async () => {
    await adapter.send({
      accountId: "default",
      to: String(FORUM.id),
      threadId: "1",
      text: "general",
      format: "plain",
    });
    expect(fake.sentMessages().at(-1)?.message_thread_id).toBeUndefined();
    await adapter.sendTyping(String(FORUM.id), "1");
    const typing = await fake.waitForCall("sendChatAction");
    expect(typing.payload).toMatchObject({
      chat_id: String(FORUM.id),
      action: "typing",
      message_thread_id: 1,
    });
  });

  it("does not treat reply threads in ordinary groups as topics", async () => {
    await adapter.start(collect);
    fake.pushMessage(GROUP, ADA, { text: "plain group reply", message_thread_id: 55 });
    expect((await waitText("plain group reply")).topicId).toBeUndefined();
  });

  it("flags replies to the bot, text mentions and commands addressed to the bot", async () => {
    await adapter.start(collect);
    const botMsg = { message_id: 9, date: 1, chat: GROUP, from: botUser(fake), text: "earlier answer" };
    fake.pushMessage(GROUP, ADA, { text: "a reply to you", reply_to_message: botMsg });
    fake.pushMessage(GROUP, ADA, {
      text: "Switchboard look",
      entities: [{ type: "text_mention", offset: 0, length: 11, user: botUser(fake) }],
    });
    const cmd = `/status@${fake.bot.username}`;
    fake.pushMessage(GROUP, ADA, {
      text: `${cmd} now`,
      entities: [{ type: "bot_command", offset: 0, length: cmd.length }],
    });
    fake.pushMessage(GROUP, ADA, {
      text: "@someone_else hi",
      entities: [{ type: "mention", offset: 0, length: 13 }],
    });

    expect(await waitText("a reply to you")).toMatchObject({ replyToBot: true, wasMentioned: false });
    expect(await waitText("Switchboard look")).toMatchObject({ wasMentioned: true });
    expect(await waitText("/status")).toMatchObject({ text: "/status now", wasMentioned: true });
    expect(await waitText("@someone_else")).toMatchObject({ wasMentioned: false, replyToBot: false });
  });

  it("normalises channel posts, senders and media; ignores service messages", async () => {
    await adapter.start(collect);
    const channel = { id: -100999, type: "channel" as const, title: "News" };
    fake.pushMessage(channel, undefined, { text: "channel news", sender_chat: channel }, "channel_post");
    fake.pushMessage(DM, { ...ADA, last_name: "Lovelace" } as FakeUser, {
      caption: "look",
      photo: [{ file_id: "p" }],
    });
    fake.pushMessage(DM, ADA, { document: { file_id: "d", file_name: "report.pdf" } });
    fake.pushMessage(GROUP, ADA, { new_chat_members: [ADA] });
    fake.pushMessage(DM, ADA, { text: "last one" });

    expect(await waitText("channel news")).toMatchObject({
      chatType: "channel",
      peerId: "-100999",
      senderId: "-100999",
      senderName: "News",
    });
    expect(await waitText("look")).toMatchObject({ senderName: "Ada Lovelace", media: [{ kind: "image" }] });
    await waitText("last one");
    expect(inbound.find((m) => m.media[0]?.kind === "file")).toMatchObject({
      text: "",
      media: [{ kind: "file", name: "report.pdf" }],
    });
    expect(inbound).toHaveLength(4);
  });

  it("sends native text as HTML and falls back to plain text when Telegram rejects the entities", async () => {
    await adapter.send({ accountId: "default", to: "4242", text: "<b>ok</b>", format: "native" });
    expect(fake.sentMessages().at(-1)).toMatchObject({ text: "<b>ok</b>", parse_mode: "HTML" });

    fake.rejectEntitiesOnce();
    const res = await adapter.send({
      accountId: "default",
      to: "4242",
      text: '<b>bold</b> &amp; <a href="https://x.dev">link</a>',
      format: "native",
    });
    expect(res.messageIds).toHaveLength(1);
    const attempts = fake.calls.filter((c) => c.method === "sendMessage").slice(-2);
    expect(attempts.map((c) => [c.ok, c.payload.parse_mode])).toEqual([
      [false, "HTML"],
      [true, undefined],
    ]);
    expect(fake.sentMessages().at(-1)?.text).toBe("bold & link (https://x.dev)");
  });

  it("replies to a message with reply_parameters on the first chunk", async () => {
    await adapter.send({
      accountId: "default",
      to: "4242",
      text: "answer",
      format: "plain",
      replyToMessageId: "31",
    });
    const call = fake.calls.filter((c) => c.method === "sendMessage").at(-1);
    expect(call?.payload.reply_parameters).toEqual({ message_id: 31, allow_sending_without_reply: true });
  });

  it("creates forum topics, and says NOT_SUPPORTED for chats that are not forums", async () => {
    const { threadId } = await adapter.createThread(String(FORUM.id), "Research run");
    expect(threadId).toMatch(/^\d+$/);
    expect((await fake.waitForCall("createForumTopic")).payload).toMatchObject({ name: "Research run" });

    fake.failNext("createForumTopic", 400, "Bad Request: the chat is not a forum");
    await expect(adapter.createThread(String(GROUP.id), "x")).rejects.toMatchObject({
      code: "NOT_SUPPORTED",
    });
  });

  it("stop confirms the offset, so a restarted bot does not see handled updates again", async () => {
    await adapter.start(collect);
    const first = fake.pushMessage(DM, ADA, { text: "before stop 1" });
    const second = fake.pushMessage(DM, ADA, { text: "before stop 2" });
    await waitText("before stop 2");
    await adapter.stop();
    expect(fake.offsets.at(-1)).toBe(Math.max(first, second) + 1);

    const again = make(fake, "polling");
    const seen: InboundMessage[] = [];
    await again.start(async (m) => {
      seen.push(m);
    });
    fake.pushMessage(DM, ADA, { text: "after restart" });
    await eventually(() => seen.find((m) => m.text === "after restart"), 500);
    expect(seen.map((m) => m.text)).toEqual(["after restart"]);
    await again.stop();
  });

  it("retries a failing inbound handler in polling mode before moving on", async () => {
    const retrying = make(fake, "polling", { inboundRetryDelaysMs: [1, 1] });
    let calls = 0;
    await retrying.start(async (m) => {
      calls++;
      if (calls === 1) throw new Error("journal busy");
      inbound.push(m);
    });
    fake.pushMessage(DM, ADA, { text: "needs a retry" });
    await waitText("needs a retry");
    expect(calls).toBe(2);
    await retrying.stop();
  });

  it("retries a 409 polling conflict with backoff (shown as reconnecting) and keeps polling", async () => {
    fake.failNext("getUpdates", 409, "Conflict: terminated by other getUpdates request");
    await adapter.start(collect);
    const status = await eventually(() =>
      adapter.status().state === "reconnecting" ? adapter.status() : undefined,
    );
    expect(status.detail).toMatch(/409 conflict: another process polls/);
    fake.pushMessage(DM, ADA, { text: "after the conflict" });
    await waitText("after the conflict");
    expect(adapter.status().state).toBe("connected");
  });

  it("stop() during start() ends cleanly and never starts polling", async () => {
    const held = fake.holdNext("getMe");
    const starting = adapter.start(collect);
    await fake.waitForCall("getMe");
    const stopping = adapter.stop();
    held.release();
    await expect(starting).rejects.toBeInstanceOf(SwitchboardError);
    await stopping;
    expect(adapter.status().state).toBe("stopped");
    expect(fake.calls.some((c) => c.method === "getUpdates")).toBe(false);
  });

  it("fails start with UNAUTHORIZED on a rejected token, without leaking the token", async () => {
    fake.failNext("getMe", 401, "Unauthorized");
    const err = await adapter.start(collect).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("UNAUTHORIZED");
    expect((err as Error).message).not.toContain(fake.token);
    expect(adapter.status().state).toBe("error");
  });
});

describe("telegram webhook mode", () => {
  let fake: FakeTelegram;
  let adapter: TelegramChannel;

  beforeEach(async () => {
    fake = await FakeTelegram.start();
    adapter = make(fake, "webhook", { webhookUrl: "https://bot.example.com/hooks/telegram/default" });
  });

  afterEach(async () => {
    await adapter.stop();
    await fake.close();
  });

  it("registers the webhook with the secret on start", async () => {
    await adapter.start(async () => undefined);
    expect((await fake.waitForCall("setWebhook")).payload).toMatchObject({
      url: "https://bot.example.com/hooks/telegram/default",
      secret_token: SECRET,
    });
    expect(fake.calls.some((c) => c.method === "getUpdates")).toBe(false);
  });

  it("rejects a missing or wrong secret with 401 and a bad body with 400", async () => {
    const seen: InboundMessage[] = [];
    await adapter.start(async (m) => {
      seen.push(m);
    });
    const body = JSON.stringify({
      update_id: 1,
      message: { message_id: 1, date: 1, chat: DM, from: ADA, text: "x" },
    });
    expect((await adapter.handleWebhook({}, body)).status).toBe(401);
    expect(
      (await adapter.handleWebhook({ "x-telegram-bot-api-secret-token": `${SECRET}x` }, body)).status,
    ).toBe(401);
    expect(
      (await adapter.handleWebhook({ "X-Telegram-Bot-Api-Secret-Token": SECRET }, "{not json")).status,
    ).toBe(400);
    expect(
      (await adapter.handleWebhook({ "X-Telegram-Bot-Api-Secret-Token": SECRET }, { nope: 1 })).status,
    ).toBe(400);
    expect(seen).toHaveLength(0);
    expect((await adapter.handleWebhook({ "X-Telegram-Bot-Api-Secret-Token": SECRET }, body)).status).toBe(
      200,
    );
    expect(seen).toHaveLength(1);
  });

  it("answers 503 while stopped and 500 when the handler fails, so Telegram redelivers", async () => {
    expect(await postWebhook(adapter, DM, ADA, { text: "too early" })).toBe(503);
    await adapter.start(async () => {
      throw new Error("journal down");
    });
    expect(await postWebhook(adapter, DM, ADA, { text: "fails" })).toBe(500);
  });

  it("a polling-mode account has no webhook", async () => {
    const polling = make(fake, "polling");
    expect((await polling.handleWebhook({ "x-telegram-bot-api-secret-token": SECRET }, "{}")).status).toBe(
      404,
    );
  });
});

describe("telegram config and errors", () => {
  it("requires a webhook secret in webhook mode, naming the field", () => {
    expect(() =>
      createTelegramChannel({ accountId: "ops", token: "1:x", mode: "webhook" }, { logger: silentLogger() }),
    ).toThrow(/channels\.telegram\.accounts\.ops\.webhookSecret: required/);
  });

  it("maps Bot API errors onto the taxonomy", () => {
    const err = (code: number, description: string, retry?: number) =>
      new GrammyError(
        "x",
        {
          ok: false,
          error_code: code,
          description,
          ...(retry ? { parameters: { retry_after: retry } } : {}),
        },
        "sendMessage",
        {},
      );
    expect(toSwitchboardError(err(429, "Too Many Requests", 7), "send")).toMatchObject({
      code: "RATE_LIMITED",
      retryAfterMs: 7000,
    });
    expect(toSwitchboardError(err(401, "Unauthorized"), "send").code).toBe("UNAUTHORIZED");
    expect(toSwitchboardError(err(403, "Forbidden: bot was blocked by the user"), "send").code).toBe(
      "FORBIDDEN",
    );
    expect(toSwitchboardError(err(400, "Bad Request: chat not found"), "send").code).toBe("NOT_FOUND");
    expect(toSwitchboardError(err(400, "Bad Request: message is too long"), "send").code).toBe(
      "INVALID_PARAMS",
    );
    expect(toSwitchboardError(err(502, "Bad Gateway"), "send").code).toBe("UNAVAILABLE");
    expect(toSwitchboardError(new Error("boom"), "send").code).toBe("INTERNAL");
  });
});
