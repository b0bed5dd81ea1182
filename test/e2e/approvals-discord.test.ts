import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApprovalsDriver, startApprovalsApp, userMessages } from "../approvals-fixture.js";
import { FakeDiscord, type FakeDiscordUser } from "../fakes/discord.js";
import type { TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { describeRedis } from "../redis.js";

/**
 * Approvals on Discord through the real discord.js adapter and the loopback gateway + REST: the
 * request carries an action row of buttons (message components), a press is an
 * INTERACTION_CREATE (type 3) acknowledged through the interaction callback with an ephemeral
 * notice (flags 64); a stranger's press, a forged custom_id and a press from another chat change
 * nothing; the owner's press resumes the run once and the request is edited to say who decided,
 * with its components removed; a double press and a replayed interaction change nothing. On both
 * drivers: on bullmq the turn waits on a worker while the press lands on the gateway.
 */

const EPHEMERAL = 64;

function approvalsOnDiscord(driver: ApprovalsDriver): void {
  let dc: FakeDiscord;
  let t: TestApp;
  let owner: FakeDiscordUser;
  let stranger: FakeDiscordUser;

  beforeAll(async () => {
    dc = await FakeDiscord.start();
    owner = dc.addUser("olivia");
    stranger = dc.addUser("sam");
    t = await startApprovalsApp(
      {
        channels: {
          discord: {
            accounts: { default: { token: dc.token, apiUrl: dc.apiUrl, gatewayUrl: dc.gatewayUrl } },
            owners: [owner.id],
            allowFrom: ["*"],
          },
        },
      },
      // unanchored: the message starts with the bot's mention
      { listen: true, match: "ping (.+)$", driver },
    );
  }, 30_000);

  afterAll(async () => {
    await t?.stop();
    await dc?.close();
  });

  /**
   * Dispatches a press and waits for its answer: the callback's status and flags, and the notice —
   * the reply's text (type 4), or, when the gateway took longer than the adapter waits (a loaded
   * machine), the text the deferred ephemeral reply (type 5) was edited to.
   */
  async function press(channelId: string, user: FakeDiscordUser, messageId: string, customId: string) {
    const id = dc.press(channelId, user, messageId, customId);
    const answer = await eventually(() => dc.answersTo(id)[0], 500, 20);
    expect([4, 5]).toContain(answer.type);
    const data = (answer.body?.data ?? {}) as { content?: string; flags?: number };
    const edited =
      answer.type === 5
        ? (await eventually(() => dc.answersTo(id).find((a) => a.type === "edit"), 500, 20)).body?.content
        : data.content;
    return { id, status: answer.status, flags: data.flags, notice: String(edited ?? "") };
  }

  it("buttons, ephemeral notices, the owner's press resumes the run once, the request is edited", {
    timeout: 30_000,
  }, async () => {
    const channel = dc.textChannelId;
    dc.message(channel, owner, `<@${dc.bot.id}> ping dc`, { mentions: [dc.bot] });
    const request = await eventually(
      () =>
        dc.sent.find((m) => m.channelId === channel && String(m.body.content).includes("Approval needed")),
      500,
      20,
    );
    const list = await t.rpc("approvals.list", {});
    expect(list.result.approvals).toHaveLength(1);
    const id = list.result.approvals[0].id as string;
    const once = `ap:${id}:once`;
    // one action row, three buttons: custom_id = the action id, style Primary 1 / Success 3 / Danger 4
    expect(request.body.components).toEqual([
      {
        type: 1,
        components: [
          { type: 2, custom_id: once, label: "Allow once", style: 1 },
          { type: 2, custom_id: `ap:${id}:always`, label: "Allow always", style: 3 },
          { type: 2, custom_id: `ap:${id}:deny`, label: "Deny", style: 4 },
        ],
      },
    ]);
    // the buttons replace the numbered text
    expect(String(request.body.content)).not.toMatch(/Reply 1/);
    // the message id Discord gave the request is the one the outbox recorded
    const mark = await eventually(
      async () => (await t.app.services.store.outbox.get(`approval:${id}#0`))?.messageIds?.[0],
      500,
      20,
    );
    expect(mark).toBe(request.id);

    const notYours = await press(channel, stranger, request.id, once);
    // an ephemeral reply, sent without the bot token (the interaction token is the credential)
    expect(notYours).toMatchObject({ status: 204, flags: EPHEMERAL });
    expect(notYours.notice).toMatch(/Not yours/);
    expect(dc.answersTo(notYours.id)[0]?.authorization).toBeUndefined();
    expect((await press(channel, owner, request.id, "ap:forged")).notice).toMatch(/not one of ours/);
    expect((await press(channel, owner, request.id, `${once}${"x".repeat(100)}`)).notice).toMatch(
      /not valid/,
    );
    // the same button pressed in another chat (the owner's DM with the bot)
    const elsewhere = await press(dc.dmChannelOf(owner), owner, request.id, once);
    expect(elsewhere).toMatchObject({ flags: EPHEMERAL });
    expect(elsewhere.notice).toMatch(/another chat/);
    expect((await t.rpc("approvals.list", {})).result.approvals).toHaveLength(1);
    expect(dc.edits.filter((e) => e.messageId === request.id)).toHaveLength(0);

    const decided = await press(channel, owner, request.id, once);
    expect(decided).toMatchObject({ status: 204, flags: EPHEMERAL, notice: "Allowed once." });
    const edit = await eventually(
      () => dc.edits.find((e) => e.messageId === request.id && e.components !== undefined),
      500,
      20,
    );
    expect(edit.content).toContain(`Allowed once by discord:${owner.id} (Olivia)`);
    expect(edit.components).toEqual([]);
    await eventually(
      () => dc.sent.find((m) => m.channelId === channel && String(m.body.content).startsWith("done:")),
      500,
      20,
    );

    // a double press (a new interaction on the same message) and the owner's press replayed
    // (the same interaction dispatched again): nothing is decided or run a second time
    expect((await press(channel, owner, request.id, `ap:${id}:deny`)).notice).toMatch(/already decided/);
    dc.press(channel, owner, request.id, once, { id: decided.id });
    // Discord refuses a second response to one interaction (40060); the adapter lives on
    await eventually(() => dc.answersTo(decided.id).find((a) => a.status === 400), 500, 20);
    expect((await press(channel, stranger, request.id, once)).notice).toMatch(/Not yours/);
    expect(dc.edits.filter((e) => e.messageId === request.id && e.components !== undefined)).toHaveLength(1);
    // the a2a reply-back turns that follow the send may land on the target meanwhile
    expect((await userMessages(t.rpc)).filter((c) => c === "dc")).toEqual(["dc"]);
  });
}

describe("approvals on discord (fs store, local queue)", () => approvalsOnDiscord("local"));
describeRedis("approvals on discord (redis, bullmq: a worker runs the turn)", () =>
  approvalsOnDiscord("bullmq"),
);
