import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  BUTTONS_PER_ROW,
  CUSTOM_ID_LIMIT,
  discordComponents,
  discordPressToAction,
  LABEL_LIMIT,
} from "../../channels/discord/actions.js";
import { createDiscordChannel, type DiscordChannel } from "../../channels/discord/index.js";
import type { ActionHandler, InboundAction, OutboundAction } from "../../src/channels/types.js";
import { SwitchboardError } from "../../src/errors.js";
import { componentsValid, FakeDiscord, type FakeDiscordUser } from "../fakes/discord.js";
import { outboundFile } from "../fakes/media-sink.js";
import { capturingLogger } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * Discord buttons (message components) through the real discord.js adapter and the loopback
 * Discord: rendering within Discord's limits (checked by the fake as Discord checks them),
 * removal on edit, and presses (INTERACTION_CREATE type 3) mapped like inbound messages and
 * acknowledged through the interaction callback.
 */

const actions = (n: number, extra: Partial<OutboundAction> = {}): OutboundAction[] =>
  Array.from({ length: n }, (_v, i) => ({ id: `act:${i}`, label: `Button ${i}`, ...extra }));

const errorOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e as SwitchboardError;
  }
  return undefined;
};

describe("discordComponents", () => {
  it("rows of five, custom_id = the action id, styles mapped, long labels cut to 80", () => {
    const rows = discordComponents([
      { id: "a", label: "One", style: "primary" },
      { id: "b", label: "Two", style: "success" },
      { id: "c", label: "Three", style: "danger" },
      { id: "d", label: "x".repeat(200) },
      ...actions(8),
    ]);
    expect(rows.map((r) => r.components.length)).toEqual([5, 5, 2]);
    expect(rows.every((r) => r.type === 1)).toBe(true);
    const buttons = rows.flatMap((r) => r.components);
    expect(buttons.map((b) => b.custom_id).slice(0, 5)).toEqual(["a", "b", "c", "d", "act:0"]);
    expect(buttons.map((b) => b.style).slice(0, 4)).toEqual([1, 3, 4, 2]);
    expect(buttons[3]?.label).toHaveLength(LABEL_LIMIT);
    expect(buttons[3]?.label?.at(-1)).toBe("…");
    expect(componentsValid(rows)).toBe(true);
    expect(discordComponents([])).toEqual([]);
  });

  it("refuses what Discord cannot carry, naming the field", () => {
    const tooMany = errorOf(() => discordComponents(actions(BUTTONS_PER_ROW * 5 + 1)));
    expect(tooMany?.code).toBe("INVALID_PARAMS");
    expect(tooMany?.message).toMatch(/^actions: 26 buttons/);
    expect(discordComponents(actions(25))).toHaveLength(5);
    const longId = errorOf(() =>
      discordComponents([
        { id: "ok", label: "ok" },
        { id: "y".repeat(CUSTOM_ID_LIMIT + 1), label: "l" },
      ]),
    );
    expect(longId?.code).toBe("INVALID_PARAMS");
    expect(longId?.message).toMatch(/^actions\[1\]\.id/);
    expect(discordComponents([{ id: "y".repeat(CUSTOM_ID_LIMIT), label: "l" }])).toHaveLength(1);
    expect(errorOf(() => discordComponents([{ id: "", label: "l" }]))?.message).toMatch(/^actions\[0\]\.id/);
    expect(
      errorOf(() =>
        discordComponents([
          { id: "same", label: "1" },
          { id: "same", label: "2" },
        ]),
      )?.message,
    ).toMatch(/^actions\[1\]\.id: "same" is used twice/);
    expect(errorOf(() => discordComponents([{ id: "a", label: "  " }]))?.message).toMatch(
      /^actions\[0\]\.label/,
    );
  });
});

describe("discordPressToAction", () => {
  const base = {
    interactionId: "1",
    customId: "ap:x:once",
    userId: "300",
    userName: "Ann",
    channelId: "200",
    kind: "guild",
    messageId: "500",
  };

  it("maps DMs to the presser, threads to their parent, and names bad fields", () => {
    const guild = discordPressToAction(base, "default");
    expect(guild.ok && guild.action).toEqual({
      channel: "discord",
      accountId: "default",
      chatType: "channel",
      peerId: "200",
      senderId: "300",
      senderName: "Ann",
      messageId: "500",
      actionId: "ap:x:once",
    });
    const dm = discordPressToAction({ ...base, kind: "dm" }, "default");
    expect(dm.ok && dm.action).toMatchObject({ chatType: "direct", peerId: "300" });
    const thread = discordPressToAction({ ...base, kind: "thread", parentId: "100" }, "default");
    expect(thread.ok && thread.action).toMatchObject({ chatType: "channel", peerId: "100", threadId: "200" });
    const orphan = discordPressToAction({ ...base, kind: "thread" }, "default");
    expect(!orphan.ok && orphan.error).toMatch(/interaction\.parentId/);
    const long = discordPressToAction({ ...base, customId: "z".repeat(101) }, "default");
    expect(!long.ok && long.error).toMatch(/interaction\.customId/);
    const noMessage = discordPressToAction({ ...base, messageId: undefined }, "default");
    expect(!noMessage.ok && noMessage.error).toMatch(/interaction\.messageId/);
    const extra = discordPressToAction({ ...base, admin: true }, "default");
    expect(extra.ok).toBe(false);
  });
});

describe("discord buttons through discord.js", () => {
  let fake: FakeDiscord;
  let adapter: DiscordChannel;
  let ada: FakeDiscordUser;
  let presses: InboundAction[];
  let answer: ActionHandler;
  let log: ReturnType<typeof capturingLogger>;

  const start = async (extra: Record<string, unknown> = {}, withHandler = true) => {
    adapter = createDiscordChannel(
      { accountId: "default", token: fake.token, apiUrl: fake.apiUrl, ...extra },
      { logger: log.logger },
    );
    await adapter.start(async () => undefined, withHandler ? { onAction: (p) => answer(p) } : {});
  };
  const send = (text: string, acts: OutboundAction[], to = fake.textChannelId) =>
    adapter.send({ accountId: "default", to, text, format: "native", actions: acts });

  beforeEach(async () => {
    presses = [];
    answer = async (p) => {
      presses.push(p);
      return { notice: `pressed ${p.actionId}` };
    };
    log = capturingLogger("debug");
    fake = await FakeDiscord.start();
    ada = fake.addUser("ada");
  });

  afterEach(async () => {
    await adapter?.stop();
    await fake.close();
  });

  it("declares buttons and posts them under the last chunk, within what Discord accepts", async () => {
    await start();
    expect(adapter.capabilities.buttons).toBe(true);
    const acts = [...actions(11), { id: "long", label: "L".repeat(120), style: "danger" as const }];
    const { messageIds } = await send(`${"word ".repeat(500)}end`, acts);
    expect(messageIds).toHaveLength(2);
    const [first, last] = fake.sent;
    expect(first?.body.components).toBeUndefined();
    const rows = last?.body.components as Array<{ components: Array<{ custom_id: string; label: string }> }>;
    expect(rows.map((r) => r.components.length)).toEqual([5, 5, 2]);
    expect(rows[2]?.components[1]).toMatchObject({ custom_id: "long", style: 4 });
    expect(rows[2]?.components[1]?.label).toHaveLength(80);

    // an id Discord cannot carry fails the send before anything is posted
    const before = fake.sent.length;
    const err = await send("x", [{ id: "i".repeat(101), label: "x" }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("INVALID_PARAMS");
    expect(fake.sent.length).toBe(before);
    // without actions: no components key at all
    await adapter.send({ accountId: "default", to: fake.textChannelId, text: "plain", format: "native" });
    expect(fake.sent.at(-1)?.body).not.toHaveProperty("components");
  });

  it("puts buttons under the last message of a send with files", async () => {
    await start();
    const file = outboundFile(Buffer.from("hello"), { kind: "file", mimeType: "text/plain", name: "a.txt" });
    await adapter.send({
      accountId: "default",
      to: fake.textChannelId,
      text: "see file",
      format: "native",
      attachments: [file],
      actions: actions(2),
    });
    const sent = fake.sent.at(-1);
    expect(sent?.files).toHaveLength(1);
    expect(sent?.body.components).toEqual(discordComponents(actions(2)));
  });

  it("an edit with actions: [] removes the buttons; without actions they stay", async () => {
    await start();
    const { messageIds } = await send("ask", actions(3));
    const messageId = messageIds[0] as string;
    const edit = (extra: Record<string, unknown>) =>
      adapter.edit({
        accountId: "default",
        to: fake.textChannelId,
        messageId,
        text: "t",
        format: "native",
        ...extra,
      });
    await edit({});
    expect(fake.edits.at(-1)).not.toHaveProperty("components");
    expect(fake.sent[0]?.body.components).toHaveLength(1);
    await edit({ actions: actions(1) });
    expect(fake.edits.at(-1)?.components).toEqual(discordComponents(actions(1)));
    await edit({ actions: [], text: "decided" });
    expect(fake.edits.at(-1)).toMatchObject({ content: "decided", components: [] });
    expect(fake.sent[0]?.body.components).toEqual([]);
  });

  it("a press in a server channel, a thread and a DM reaches the handler mapped like a message; the notice is ephemeral", async () => {
    await start();
    const { messageIds } = await send("ask", actions(2));
    const inChannel = fake.press(fake.textChannelId, ada, messageIds[0] as string, "act:1");
    const first = await eventually(() => fake.answersTo(inChannel)[0], 500, 20);
    expect(first).toMatchObject({ status: 204, type: 4, authorization: undefined });
    expect(first.body?.data).toMatchObject({
      content: "pressed act:1",
      flags: 64,
      allowed_mentions: { parse: [] },
    });
    expect(presses[0]).toEqual({
      channel: "discord",
      accountId: "default",
      chatType: "channel",
      peerId: fake.textChannelId,
      senderId: ada.id,
      senderName: "Ada",
      messageId: messageIds[0],
      actionId: "act:1",
    });

    const threadId = fake.openThread(fake.textChannelId, ada, "topic");
    const inThread = await adapter.send({
      accountId: "default",
      to: fake.textChannelId,
      threadId,
      text: "ask",
      format: "native",
      actions: actions(1),
    });
    fake.press(threadId, ada, inThread.messageIds[0] as string, "act:0");
    await eventually(() => presses[1], 500, 20);
    expect(presses[1]).toMatchObject({ chatType: "channel", peerId: fake.textChannelId, threadId });

    const dm = fake.dmChannelOf(ada);
    fake.press(dm, ada, "123", "act:0");
    await eventually(() => presses[2], 500, 20);
    expect(presses[2]).toMatchObject({ chatType: "direct", peerId: ada.id, senderId: ada.id });
  });

  it("no notice → a deferred update; a slow handler → a deferred ephemeral reply edited to the notice", async () => {
    await start({ pressAckWithinMs: 0 });
    const { messageIds } = await send("ask", actions(1));
    const mid = messageIds[0] as string;
    answer = async () => {
      await new Promise((r) => setTimeout(r, 150));
      return { notice: "late notice" };
    };
    const slow = fake.press(fake.textChannelId, ada, mid, "act:0");
    const answers = await eventually(
      () => (fake.answersTo(slow).length >= 2 ? fake.answersTo(slow) : undefined),
      500,
      20,
    );
    expect(answers[0]).toMatchObject({ type: 5, status: 204 });
    expect(answers[0]?.body?.data).toMatchObject({ flags: 64 });
    expect(answers[1]).toMatchObject({ type: "edit", status: 200 });
    expect(answers[1]?.body).toMatchObject({ content: "late notice" });

    await adapter.stop();
    await start();
    answer = async () => ({});
    const quiet = fake.press(fake.textChannelId, ada, mid, "act:0");
    expect((await eventually(() => fake.answersTo(quiet)[0], 500, 20)).type).toBe(6);
  });

  it("a refused, failing or unhandled press is answered, an expired one is logged, and the adapter lives on", async () => {
    await start();
    const { messageIds } = await send("ask", actions(1));
    const mid = messageIds[0] as string;
    const noticeOf = async (id: string) =>
      ((await eventually(() => fake.answersTo(id)[0], 500, 20)).body?.data as { content?: string })?.content;

    // a forged custom_id Discord would never carry: refused before the handler
    expect(await noticeOf(fake.press(fake.textChannelId, ada, mid, "f".repeat(150)))).toMatch(/not valid/);
    expect(presses).toHaveLength(0);
    answer = async () => {
      throw new Error("boom");
    };
    expect(await noticeOf(fake.press(fake.textChannelId, ada, mid, "act:0"))).toMatch(/went wrong/);

    // the interaction's token has expired: Discord answers 10062, the adapter logs it
    answer = async (p) => {
      presses.push(p);
      return { notice: "ok" };
    };
    const stale = fake.press(fake.textChannelId, ada, mid, "act:0", { expired: true });
    expect((await eventually(() => fake.answersTo(stale)[0], 500, 20)).status).toBe(404);
    await eventually(() => log.lines.find((l) => l.includes("interaction not acknowledged")), 500, 20);
    // the same interaction delivered twice: the second answer is refused (40060), nothing breaks
    const twice = fake.press(fake.textChannelId, ada, mid, "act:0");
    await eventually(() => fake.answersTo(twice)[0], 500, 20);
    fake.press(fake.textChannelId, ada, mid, "act:0", { id: twice });
    expect((await eventually(() => fake.answersTo(twice)[1], 500, 20)).status).toBe(400);
    expect(await noticeOf(fake.press(fake.textChannelId, ada, mid, "act:0"))).toBe("ok");
    expect(adapter.status().state).toBe("connected");

    await adapter.stop();
    await start({}, false);
    expect(await noticeOf(fake.press(fake.textChannelId, ada, mid, "act:0"))).toMatch(/not handled here/);
  });
});
