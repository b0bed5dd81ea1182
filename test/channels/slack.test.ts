import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createSlackChannel, type SlackChannel } from "../../channels/slack/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { SwitchboardError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { type ChannelHarness, channelContract } from "../contract/channel.js";
import { FakeSlack, postSignedEvent, signSlackRequest } from "../fakes/slack.js";
import { eventually } from "../helpers.js";

const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const ADA = "U0ADA";
const DM = "D0DM1";
const CHAN = "C0GEN";
const NOW_S = 1_750_000_000;

function make(fake: FakeSlack, mode: "http" | "socket", extra: Record<string, unknown> = {}): SlackChannel {
  return createSlackChannel(
    {
      accountId: "default",
      botToken: fake.botToken,
      apiUrl: fake.apiUrl,
      mode,
      ...(mode === "http" ? { signingSecret: SECRET } : { appToken: fake.appToken }),
      ...extra,
    },
    // A pinned clock: signature freshness is checked against it, never against wall time.
    { logger: silentLogger(), now: () => NOW_S * 1000 },
  );
}

const post = (adapter: SlackChannel, body: Record<string, unknown>, opts: { retryNum?: number } = {}) =>
  postSignedEvent(adapter, SECRET, body, { timestampS: NOW_S, ...opts });

function dmEvent(fake: FakeSlack, text: string, user = ADA): Record<string, unknown> {
  return { type: "message", channel: DM, channel_type: "im", user, text, ts: fake.nextTs() };
}

function channelEvent(
  fake: FakeSlack,
  text: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    type: "message",
    channel: CHAN,
    channel_type: "channel",
    user: ADA,
    text,
    ts: fake.nextTs(),
    ...extra,
  };
}

async function harness(mode: "http" | "socket"): Promise<ChannelHarness> {
  const fake = await FakeSlack.start();
  const adapter = make(fake, mode);
  const inject = async (event: Record<string, unknown>) => {
    if (mode === "http") {
      const res = await post(adapter, fake.envelope(event));
      if (res.status !== 200) throw new Error(`handleEvents answered ${res.status}`);
      return;
    }
    // The adapter acks only after the handler accepted, so the ack keeps injections in order.
    await fake.waitAck(fake.sendSocketEvent(fake.envelope(event)));
  };
  return {
    adapter,
    injectDirect: (text) => inject(dmEvent(fake, text)),
    injectGroup: (text, { mention }) =>
      inject(channelEvent(fake, mention ? `<@${fake.botUserId}> ${text}` : text)),
    injectOwn: (text) => inject({ ...dmEvent(fake, text, fake.botUserId), bot_id: fake.botId }),
    sent: async () =>
      fake
        .posted()
        .map((p) => ({ to: p.channel, text: p.text, ...(p.thread_ts ? { threadId: p.thread_ts } : {}) })),
    rateLimitNextSend: async (s) => fake.failNext("chat.postMessage", { status: 429, retryAfter: s }),
    cleanup: () => fake.close(),
  };
}

channelContract("slack (http events)", () => harness("http"));
channelContract("slack (socket mode)", () => harness("socket"));

describe("slack http events", () => {
  let fake: FakeSlack;
  let adapter: SlackChannel;
  let inbound: InboundMessage[];
  const collect = async (m: InboundMessage): Promise<void> => {
    inbound.push(m);
  };

  beforeEach(async () => {
    inbound = [];
    fake = await FakeSlack.start();
    adapter = make(fake, "http");
  });

  afterEach(async () => {
    await adapter.stop();
    await fake.close();
  });

  it("verifies the v0 signature and refuses stale timestamps", async () => {
    await adapter.start(collect);
    const raw = JSON.stringify(fake.envelope(dmEvent(fake, "signed")));
    const good = signSlackRequest(SECRET, raw, NOW_S);
    expect((await adapter.handleEvents({}, raw)).status).toBe(401);
    expect(
      (await adapter.handleEvents({ ...good, "x-slack-signature": `${good["x-slack-signature"]}0` }, raw))
        .status,
    ).toBe(401);
    expect((await adapter.handleEvents(signSlackRequest("wrong-secret", raw, NOW_S), raw)).status).toBe(401);
    expect((await adapter.handleEvents(signSlackRequest(SECRET, raw, NOW_S - 301), raw)).status).toBe(401);
    // The body is covered by the signature.
    expect((await adapter.handleEvents(good, raw.replace("signed", "forged"))).status).toBe(401);
    expect(inbound).toHaveLength(0);
    expect((await adapter.handleEvents(signSlackRequest(SECRET, raw, NOW_S - 299), raw)).status).toBe(200);
    expect(inbound.map((m) => m.text)).toEqual(["signed"]);
  });

  it("answers url_verification with the challenge (signed, even before start)", async () => {
    const body = {
      token: "t",
      challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
      type: "url_verification",
    };
    expect(await post(adapter, body)).toEqual({ status: 200, body: { challenge: body.challenge } });
    const raw = JSON.stringify(body);
    expect((await adapter.handleEvents({}, raw)).status).toBe(401);
  });

  it("answers 503 before start, 400 for a malformed envelope, 200 for envelope types it does not use", async () => {
    expect((await post(adapter, fake.envelope(dmEvent(fake, "early")))).status).toBe(503);
    await adapter.start(collect);
    expect((await post(adapter, { type: "event_callback", event: { type: "message" } })).status).toBe(400);
    expect((await post(adapter, { type: "some_future_type" })).status).toBe(200);
  });

  it("processes a retried event_id once, including a retry that overtakes the first delivery", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let calls = 0;
    await adapter.start(async (m) => {
      calls++;
      await gate;
      inbound.push(m);
    });
    const body = fake.envelope(dmEvent(fake, "once only"));
    const first = post(adapter, body);
    const retry = post(adapter, body, { retryNum: 1 });
    release();
    expect((await first).status).toBe(200);
    expect((await retry).status).toBe(200);
    expect((await post(adapter, body, { retryNum: 2 })).status).toBe(200);
    expect(calls).toBe(1);
    expect(inbound.map((m) => m.text)).toEqual(["once only"]);
  });

  it("a retry that overtakes a failing first delivery is not acknowledged either", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let calls = 0;
    await adapter.start(async () => {
      calls++;
      await gate;
      throw new Error("journal down");
    });
    const body = fake.envelope(dmEvent(fake, "fails slowly"));
    const first = post(adapter, body);
    const retry = post(adapter, body, { retryNum: 1 });
    release();
    expect((await first).status).toBe(500);
    expect((await retry).status).toBe(500);
    expect(calls).toBe(1);
  });

  it("answers 500 when the handler fails, and the retry delivers the message", async () => {
    let fail = true;
    await adapter.start(async (m) => {
      if (fail) throw new Error("journal down");
      inbound.push(m);
    });
    const body = fake.envelope(dmEvent(fake, "second chance"));
    expect((await post(adapter, body)).status).toBe(500);
    fail = false;
    expect((await post(adapter, body, { retryNum: 1 })).status).toBe(200);
    expect(inbound.map((m) => m.text)).toEqual(["second chance"]);
  });

  it("delivers a mention once when Slack sends both message and app_mention", async () => {
    await adapter.start(collect);
    const msg = channelEvent(fake, `<@${fake.botUserId}> hello there`);
    const mention = { type: "app_mention", channel: CHAN, user: ADA, text: msg.text, ts: msg.ts };
    expect((await post(adapter, fake.envelope(msg))).status).toBe(200);
    expect((await post(adapter, fake.envelope(mention))).status).toBe(200);
    // The other order as well.
    const msg2 = channelEvent(fake, `<@${fake.botUserId}> again`);
    const mention2 = { type: "app_mention", channel: CHAN, user: ADA, text: msg2.text, ts: msg2.ts };
    await post(adapter, fake.envelope(mention2));
    await post(adapter, fake.envelope(msg2));
    expect(inbound.map((m) => [m.text, m.wasMentioned, m.chatType])).toEqual([
      [`<@${fake.botUserId}> hello there`, true, "channel"],
      [`<@${fake.botUserId}> again`, true, "channel"],
    ]);
  });

  it("resolves the chat type of an app_mention (no channel_type) with conversations.info", async () => {
    fake.conversations.set("G0MPIM", { is_mpim: true, is_private: true });
    fake.conversations.set("C0PRIV", { is_private: true });
    await adapter.start(collect);
    await post(
      adapter,
      fake.envelope({
        type: "app_mention",
        channel: "G0MPIM",
        user: ADA,
        text: "in mpim",
        ts: fake.nextTs(),
      }),
    );
    await post(
      adapter,
      fake.envelope({
        type: "app_mention",
        channel: "C0PRIV",
        user: ADA,
        text: "in private",
        ts: fake.nextTs(),
      }),
    );
    expect(inbound.map((m) => [m.text, m.chatType, m.peerId])).toEqual([
      ["in mpim", "group", "G0MPIM"],
      ["in private", "channel", "C0PRIV"],
    ]);
  });

  it("keeps thread replies in their thread and flags replies to the bot's thread", async () => {
    await adapter.start(collect);
    const root = fake.nextTs();
    await post(adapter, fake.envelope(channelEvent(fake, "root post", { ts: root, thread_ts: root })));
    await post(
      adapter,
      fake.envelope(channelEvent(fake, "reply in thread", { thread_ts: root, parent_user_id: ADA })),
    );
    await post(
      adapter,
      fake.envelope(channelEvent(fake, "reply to bot", { thread_ts: root, parent_user_id: fake.botUserId })),
    );
    const [top, reply, toBot] = inbound;
    expect(top?.threadId).toBeUndefined();
    expect(reply).toMatchObject({ threadId: root, replyToBot: false, peerId: CHAN });
    expect(toBot).toMatchObject({ threadId: root, replyToBot: true });
  });

  it("normalises DMs, MPIMs, sender names and files; ignores edits and bot posts", async () => {
    fake.users.set(ADA, { name: "ada", real_name: "Ada Lovelace", display_name: "ada.l" });
    await adapter.start(collect);
    await post(adapter, fake.envelope(dmEvent(fake, "dm text")));
    await post(
      adapter,
      fake.envelope({ ...channelEvent(fake, "mpim text"), channel: "G0MP", channel_type: "mpim" }),
    );
    await post(adapter, fake.envelope({ ...channelEvent(fake, "edited"), subtype: "message_changed" }));
    await post(
      adapter,
      fake.envelope({ ...channelEvent(fake, "other bot"), subtype: "bot_message", bot_id: "B0TH" }),
    );
    await post(
      adapter,
      fake.envelope({
        ...channelEvent(fake, "with files"),
        subtype: "file_share",
        files: [
          { name: "a.png", mimetype: "image/png" },
          { name: "notes.txt", mimetype: "text/plain" },
        ],
      }),
    );
    expect(inbound.map((m) => m.text)).toEqual(["dm text", "mpim text", "with files"]);
    expect(inbound[0]).toMatchObject({ chatType: "direct", peerId: ADA, senderId: ADA, senderName: "ada.l" });
    expect(inbound[1]).toMatchObject({ chatType: "group", peerId: "G0MP" });
    expect(inbound[2]?.media).toEqual([
      { kind: "image", name: "a.png" },
      { kind: "file", name: "notes.txt" },
    ]);
  });

  it("a socket-mode account has no events endpoint", async () => {
    const socket = make(fake, "socket");
    expect((await post(socket, fake.envelope(dmEvent(fake, "x")))).status).toBe(404);
  });
});

describe("slack outbound", () => {
  let fake: FakeSlack;
  let adapter: SlackChannel;

  beforeEach(async () => {
    fake = await FakeSlack.start();
    adapter = make(fake, "http");
  });

  afterEach(async () => {
    await adapter.stop();
    await fake.close();
  });

  it("posts mrkdwn as is, escapes plain text, and replies in threads with thread_ts", async () => {
    await adapter.send({
      accountId: "default",
      to: CHAN,
      text: "*bold* <https://x.dev|x>",
      format: "native",
    });
    await adapter.send({
      accountId: "default",
      to: CHAN,
      text: "a < b & c",
      format: "plain",
      threadId: "1700.000100",
    });
    expect(fake.posted()).toEqual([
      expect.objectContaining({ channel: CHAN, text: "*bold* <https://x.dev|x>", mrkdwn: "true" }),
      expect.objectContaining({
        channel: CHAN,
        text: "a &lt; b &amp; c",
        mrkdwn: "false",
        thread_ts: "1700.000100",
      }),
    ]);
  });

  it("sets the assistant thread status for typing in threads, using the DM's conversation id", async () => {
    await adapter.start(async () => undefined);
    await post(adapter, fake.envelope(dmEvent(fake, "hi")));
    await adapter.sendTyping(ADA, "1700.000200");
    await adapter.sendTyping(CHAN); // no thread: nothing to call
    const calls = fake.calls.filter((c) => c.method === "assistant.threads.setStatus");
    expect(calls.map((c) => c.args)).toEqual([
      expect.objectContaining({ channel_id: DM, thread_ts: "1700.000200", status: "is typing…" }),
    ]);
    fake.failNext("assistant.threads.setStatus", { error: "missing_scope" });
    await expect(adapter.sendTyping(CHAN, "1700.000300")).resolves.toBeUndefined();
  });

  it("createThread posts a root message and returns its ts as the thread id", async () => {
    const { threadId } = await adapter.createThread(CHAN, "Sub-agent: research");
    const root = fake.posted().at(-1);
    expect(root).toMatchObject({ channel: CHAN, text: "Sub-agent: research" });
    expect(threadId).toBe(root?.ts);
  });

  it("maps Slack errors onto the taxonomy", async () => {
    const send = () => adapter.send({ accountId: "default", to: CHAN, text: "x", format: "plain" });
    fake.failNext("chat.postMessage", { error: "not_in_channel" });
    await expect(send()).rejects.toMatchObject({ code: "FORBIDDEN" });
    fake.failNext("chat.postMessage", { error: "channel_not_found" });
    await expect(send()).rejects.toMatchObject({ code: "NOT_FOUND" });
    fake.failNext("chat.postMessage", { error: "invalid_auth" });
    await expect(send()).rejects.toMatchObject({ code: "UNAUTHORIZED" });
    fake.failNext("chat.postMessage", { status: 503 });
    await expect(send()).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });

  it("fails start with UNAUTHORIZED on a bad bot token, without the token in the message", async () => {
    const bad = createSlackChannel(
      {
        accountId: "default",
        botToken: "xoxb-wrong",
        apiUrl: fake.apiUrl,
        mode: "http",
        signingSecret: SECRET,
      },
      { logger: silentLogger() },
    );
    const err = await bad
      .start(async () => undefined)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("UNAUTHORIZED");
    expect((err as Error).message).not.toContain("xoxb-wrong");
    expect(bad.status().state).toBe("error");
  });
});

describe("slack socket mode", () => {
  let fake: FakeSlack;

  beforeEach(async () => {
    fake = await FakeSlack.start();
  });

  afterEach(async () => {
    await fake.close();
  });

  it("is rejected clearly without an app token, as http mode is without a signing secret", () => {
    expect(() =>
      createSlackChannel(
        { accountId: "work", botToken: "xoxb-1", mode: "socket" },
        { logger: silentLogger() },
      ),
    ).toThrow(/channels\.slack\.accounts\.work\.appToken: required when mode is "socket"/);
    expect(() =>
      createSlackChannel({ accountId: "work", botToken: "xoxb-1", mode: "http" }, { logger: silentLogger() }),
    ).toThrow(/channels\.slack\.accounts\.work\.signingSecret: required when mode is "http"/);
  });

  it("acknowledges an envelope only after the handler accepted it", async () => {
    const adapter = make(fake, "socket");
    let attempts = 0;
    const seen: string[] = [];
    await adapter.start(async (m) => {
      attempts++;
      if (attempts === 1) throw new Error("journal down");
      seen.push(m.text);
    });
    expect(fake.openSockets()).toBe(1);
    const event = fake.envelope(dmEvent(fake, "ack after accept"));
    const first = fake.sendSocketEvent(event);
    // The failure is settled within the task that ran the handler, before this check runs.
    await eventually(() => attempts === 1);
    // Slack redelivers an unacknowledged envelope; the redelivery is what gets through.
    await fake.waitAck(fake.sendSocketEvent(event, 1));
    expect(seen).toEqual(["ack after accept"]);
    expect(fake.acked.has(first)).toBe(false);
    await adapter.stop();
    await eventually(() => fake.openSockets() === 0);
    expect(adapter.status().state).toBe("stopped");
  });

  it("stop() ends a start() that is still retrying apps.connections.open", async () => {
    const adapter = make(fake, "socket");
    fake.failNext("apps.connections.open", { error: "internal_error" });
    const starting = adapter.start(async () => undefined);
    await eventually(() => fake.calls.some((c) => c.method === "apps.connections.open"));
    await adapter.stop();
    await expect(starting).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(adapter.status().state).toBe("stopped");
    expect(fake.openSockets()).toBe(0);
  });

  it("fails start with a clear error when the app token is rejected", async () => {
    const adapter = make(fake, "socket", { appToken: "xapp-wrong" });
    await expect(adapter.start(async () => undefined)).rejects.toBeInstanceOf(SwitchboardError);
    expect(adapter.status().state).toBe("error");
  });
});
