import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createDiscordChannel, type DiscordChannel } from "../../channels/discord/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { SwitchboardError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { type ChannelHarness, channelContract } from "../contract/channel.js";
import { FakeDiscord, type FakeDiscordUser } from "../fakes/discord.js";
import { eventually } from "../helpers.js";

function make(fake: FakeDiscord, extra: Record<string, unknown> = {}): DiscordChannel {
  return createDiscordChannel(
    { accountId: "default", token: fake.token, apiUrl: fake.apiUrl, ...extra },
    { logger: silentLogger() },
  );
}

const SEND = /^POST \/channels\/\d+\/messages$/;

async function harness(): Promise<ChannelHarness> {
  const fake = await FakeDiscord.start();
  const ada = fake.addUser("ada");
  const adapter = make(fake);
  return {
    adapter,
    // One gateway connection delivers frames in order, so no acknowledgement is needed.
    injectDirect: async (text) => void fake.dm(ada, text),
    injectGroup: async (text, { mention }) =>
      void (mention
        ? fake.message(fake.textChannelId, ada, `<@${fake.bot.id}> ${text}`, { mentions: [fake.bot] })
        : fake.message(fake.textChannelId, ada, text)),
    injectOwn: async (text) => void fake.message(fake.dmChannelOf(ada), fake.bot, text),
    sent: async () => fake.sentTo().map(({ body: _body, ...s }) => s),
    rateLimitNextSend: async (s) => fake.failNext(SEND, { status: 429, retryAfter: s }),
    cleanup: () => fake.close(),
  };
}

channelContract("discord", harness);

describe("discord specifics", () => {
  let fake: FakeDiscord;
  let adapter: DiscordChannel;
  let ada: FakeDiscordUser;
  let inbound: InboundMessage[];
  const collect = async (m: InboundMessage): Promise<void> => {
    inbound.push(m);
  };
  const waitText = (needle: string): Promise<InboundMessage> =>
    eventually(() => inbound.find((m) => m.text.includes(needle)), 500);
  const errorOf = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => e as SwitchboardError,
    );

  beforeEach(async () => {
    inbound = [];
    fake = await FakeDiscord.start();
    ada = fake.addUser("ada");
    adapter = make(fake);
  });

  afterEach(async () => {
    await adapter.stop();
    await fake.close();
  });

  it("identifies with the Message Content intent and reaches the gateway through the configured REST base", async () => {
    await adapter.start(collect);
    const intents = Number(fake.identifies[0]?.intents);
    // Guilds 1 + GuildMessages 512 + DirectMessages 4096 + MessageContent 32768.
    expect(intents).toBe(37377);
    expect(fake.calls[0]).toMatchObject({
      method: "GET",
      path: "/gateway/bot",
      authorization: `Bot ${fake.token}`,
    });
  });

  it("answers a DM in the DM channel the message came from", async () => {
    await adapter.start(collect);
    fake.dm(ada, "hello bot");
    const msg = await waitText("hello bot");
    expect(msg).toMatchObject({ chatType: "direct", peerId: ada.id, senderId: ada.id, senderName: "Ada" });
    expect(msg.threadId).toBeUndefined();

    const res = await adapter.send({
      accountId: "default",
      to: msg.peerId,
      text: "hi Ada",
      format: "native",
    });
    const last = fake.sent.at(-1);
    expect(last?.id).toBe(res.messageIds[0]);
    expect(last?.channelId).toBe(fake.dmChannelOf(ada));
    // The DM channel was remembered from the inbound message: no DM had to be opened.
    expect(fake.calls.some((c) => c.path === "/users/@me/channels")).toBe(false);
  });

  it("opens a DM for a user who never wrote, then remembers it", async () => {
    const bob = fake.addUser("bob");
    await adapter.start(collect);
    await adapter.send({ accountId: "default", to: bob.id, text: "first", format: "native" });
    await adapter.send({ accountId: "default", to: bob.id, text: "second", format: "native" });
    expect(fake.sentTo().map((s) => [s.to, s.text])).toEqual([
      [bob.id, "first"],
      [bob.id, "second"],
    ]);
    expect(fake.calls.filter((c) => c.path === "/users/@me/channels")).toHaveLength(1);

    const err = await errorOf(
      adapter.send({ accountId: "default", to: "123456789", text: "x", format: "native" }),
    );
    expect(err?.code).toBe("NOT_FOUND");
  });

  it("sets wasMentioned for <@id> and <@!id>, not for plain channel messages, and replyToBot for replies", async () => {
    await adapter.start(collect);
    fake.message(fake.textChannelId, ada, "just chatting");
    fake.message(fake.textChannelId, ada, `<@${fake.bot.id}> /status`, { mentions: [fake.bot] });
    fake.message(fake.textChannelId, ada, `hey <@!${fake.bot.id}> nickname form`);
    // A pinging reply lists the bot in mentions; that is a reply, not a mention.
    fake.message(fake.textChannelId, ada, "replying to you", {
      mentions: [fake.bot],
      replyTo: { id: "123", author: fake.bot },
    });
    const plain = await waitText("just chatting");
    const addressed = await waitText("/status");
    const nick = await waitText("nickname form");
    const reply = await waitText("replying to you");

    expect(plain).toMatchObject({ chatType: "channel", peerId: fake.textChannelId, wasMentioned: false });
    expect(addressed).toMatchObject({ wasMentioned: true, replyToBot: false });
    // The leading mention is how a bot is addressed; it is removed so the command parses.
    expect(addressed.text).toBe("/status");
    expect(nick).toMatchObject({ wasMentioned: true, text: `hey <@!${fake.bot.id}> nickname form` });
    expect(reply).toMatchObject({ wasMentioned: false, replyToBot: true });
  });

  it("ignores other bots", async () => {
    const otherBot = { ...fake.addUser("otherbot"), bot: true };
    await adapter.start(collect);
    fake.message(fake.textChannelId, otherBot, "bot chatter");
    fake.message(fake.textChannelId, ada, "human marker");
    await waitText("human marker");
    expect(inbound.map((m) => m.text)).toEqual(["human marker"]);
  });

  it("maps a thread message to its parent channel with threadId", async () => {
    await adapter.start(collect);
    const threadId = fake.openThread(fake.textChannelId, ada, "a topic");
    fake.message(threadId, ada, "inside the thread");
    const msg = await waitText("inside the thread");
    expect(msg).toMatchObject({
      chatType: "channel",
      peerId: fake.textChannelId,
      parentPeerId: fake.textChannelId,
      threadId,
    });
  });

  it("creates a thread under a text channel and posts into it", async () => {
    await adapter.start(collect);
    const { threadId } = await adapter.createThread(fake.textChannelId, "  Sub-agent: research  ");
    const call = fake.calls.find(
      (c) => c.method === "POST" && c.path === `/channels/${fake.textChannelId}/threads`,
    );
    expect(call?.body).toMatchObject({ name: "Sub-agent: research", type: 11 });
    expect(fake.channels.get(threadId)?.parent_id).toBe(fake.textChannelId);

    await adapter.send({
      accountId: "default",
      to: fake.textChannelId,
      threadId,
      text: "from the child",
      format: "native",
    });
    expect(fake.sentTo().at(-1)).toMatchObject({ to: fake.textChannelId, threadId, text: "from the child" });

    // The bot's client saw THREAD_CREATE, so messages in the new thread arrive with its id.
    fake.message(threadId, ada, "follow-up in new thread");
    expect(await waitText("follow-up in new thread")).toMatchObject({ threadId, peerId: fake.textChannelId });
  });

  it("refuses threads in DMs as NOT_SUPPORTED", async () => {
    await adapter.start(collect);
    fake.dm(ada, "dm first");
    await waitText("dm first");
    expect((await errorOf(adapter.createThread(ada.id, "nope")))?.code).toBe("NOT_SUPPORTED");
    const bob = fake.addUser("bob");
    expect((await errorOf(adapter.createThread(bob.id, "nope")))?.code).toBe("NOT_SUPPORTED");
  });

  it("sends typing to channels, DMs and threads", async () => {
    await adapter.start(collect);
    fake.dm(ada, "typing dm");
    await waitText("typing dm");
    const threadId = fake.openThread(fake.textChannelId, ada, "t");
    await adapter.sendTyping(fake.textChannelId);
    await adapter.sendTyping(ada.id);
    await adapter.sendTyping(fake.textChannelId, threadId);
    expect(fake.typing).toEqual([fake.textChannelId, fake.dmChannelOf(ada), threadId]);
  });

  it("escapes plain text, limits pings to users, suppresses embeds and replies to a message", async () => {
    await adapter.start(collect);
    await adapter.send({ accountId: "default", to: fake.textChannelId, text: "*not bold*", format: "plain" });
    await adapter.send({
      accountId: "default",
      to: fake.textChannelId,
      text: "**bold** @everyone",
      format: "native",
      replyToMessageId: "42",
    });
    const [plain, native] = fake.sentTo().map((s) => s.body);
    expect(plain?.content).toBe("\\*not bold\\*");
    expect(native).toMatchObject({
      content: "**bold** @everyone",
      allowed_mentions: { parse: ["users"] },
      flags: 4,
      message_reference: { message_id: "42", fail_if_not_exists: false },
    });
  });

  it("maps Discord errors to SwitchboardError codes", async () => {
    await adapter.start(collect);
    fake.failNext(SEND, { status: 403, code: 50_013, message: "Missing Permissions" });
    const denied = await errorOf(
      adapter.send({ accountId: "default", to: fake.textChannelId, text: "x", format: "native" }),
    );
    expect(denied).toBeInstanceOf(SwitchboardError);
    expect(denied?.code).toBe("FORBIDDEN");
    expect(denied?.message).not.toContain(fake.token);

    fake.failNext(SEND, { status: 400, code: 50_035, message: "Invalid Form Body" });
    expect(
      (
        await errorOf(
          adapter.send({ accountId: "default", to: fake.textChannelId, text: "x", format: "native" }),
        )
      )?.code,
    ).toBe("INVALID_PARAMS");
  });

  it("shows a gateway drop as reconnecting until the session resumes", async () => {
    await adapter.start(collect);
    fake.holdResumes = true;
    fake.dropConnections(4000);
    await eventually(() => adapter.status().state === "reconnecting", 500);
    // discord.js waits a moment before reconnecting; release the RESUME once it is in.
    await eventually(() => fake.heldResumeCount > 0, 500);
    expect(adapter.status().state).toBe("reconnecting");
    fake.releaseResumes();
    await eventually(() => adapter.status().state === "connected", 500);
    fake.dm(ada, "after resume");
    await waitText("after resume");
    // Resumed, not re-identified.
    expect(fake.identifies).toHaveLength(1);
  });

  it("uses gatewayUrl from config instead of the one /gateway/bot names", async () => {
    fake.gatewayBotUrl = "ws://127.0.0.1:9/unreachable";
    const proxied = make(fake, { gatewayUrl: fake.gatewayUrl });
    try {
      await proxied.start(collect);
      expect(proxied.status().state).toBe("connected");
    } finally {
      await proxied.stop();
    }
  });

  it("fails start with a hint when the Message Content intent is not enabled", async () => {
    fake.identifyCloseCode = 4014;
    const err = await errorOf(adapter.start(collect));
    expect(err?.code).toBe("CONFIG");
    expect(err?.message).toContain("Message Content Intent");
    expect(adapter.status().state).toBe("error");
  });

  it("fails start with UNAUTHORIZED for a rejected token", async () => {
    const bad = createDiscordChannel(
      { accountId: "default", token: "wrong", apiUrl: fake.apiUrl },
      { logger: silentLogger() },
    );
    const err = await errorOf(bad.start(collect));
    expect(err?.code).toBe("UNAUTHORIZED");
    expect(bad.status().state).toBe("error");
  });

  it("names the config field in validation errors", () => {
    expect(() => createDiscordChannel({ accountId: "ops", token: "" }, { logger: silentLogger() })).toThrow(
      /channels\.discord\.accounts\.ops\.token/,
    );
  });
});
