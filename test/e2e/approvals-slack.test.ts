import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApprovalsDriver, startApprovalsApp, userMessages } from "../approvals-fixture.js";
import { blockActionsPayload, FakeSlack, signedInteractive, signSlackRequest } from "../fakes/slack.js";
import type { TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { describeRedis } from "../redis.js";

/**
 * Approvals on Slack through the real Bolt adapter (HTTP mode) and the loopback Web API: the
 * request carries a Block Kit actions block, a press is a signed block_actions form POST answered
 * with an ephemeral notice (chat.postEphemeral); a stranger's press, a forged action id, a press
 * from another conversation and a replayed (stale) request change nothing; the owner's press
 * resumes the run once and the request is updated (chat.update) without its buttons. On both
 * drivers: on bullmq the turn waits on a worker while the press lands on the gateway.
 */

const SECRET = "slack-signing-secret-approvals";
const OWNER = "U1";
const STRANGER = "U9";

function approvalsOnSlack(driver: ApprovalsDriver): void {
  let slack: FakeSlack;
  let t: TestApp;
  let hook: string;

  beforeAll(async () => {
    slack = await FakeSlack.start();
    t = await startApprovalsApp(
      {
        channels: {
          slack: {
            accounts: {
              default: {
                botToken: slack.botToken,
                signingSecret: SECRET,
                mode: "http",
                apiUrl: slack.apiUrl,
              },
            },
            owners: [OWNER],
            allowFrom: ["*"],
          },
        },
      },
      // unanchored: the message starts with the bot's mention
      { listen: true, match: "ping (.+)$", driver },
    );
    hook = `http://127.0.0.1:${t.app.address?.port}/hooks/slack/default/events`;
  }, 30_000);

  afterAll(async () => {
    await t?.stop();
    await slack?.close();
  });

  const ephemerals = () => slack.calls.filter((c) => c.method === "chat.postEphemeral" && c.ok);

  /** POSTs a signed press; returns the HTTP status and the ephemeral notice it produced (if any). */
  async function press(
    channel: string,
    user: string,
    ts: string,
    actionId: string,
    opts: { timestampS?: number; secret?: string; value?: string } = {},
  ): Promise<{ status: number; notice?: string }> {
    const before = ephemerals().length;
    const { headers, body } = signedInteractive(
      opts.secret ?? SECRET,
      blockActionsPayload(channel, user, ts, actionId, opts.value ? { value: opts.value } : {}),
      opts.timestampS,
    );
    const res = await fetch(hook, { method: "POST", headers, body });
    if (res.status !== 200) return { status: res.status };
    const call = await eventually(() => ephemerals()[before], 500, 20);
    expect(call.args.user).toBe(user);
    expect(call.args.channel).toBe(channel);
    return { status: 200, notice: call.args.text ?? "" };
  }

  it("block kit buttons, ephemeral notices, the owner's press resumes the run once, the request is updated", {
    timeout: 30_000,
  }, async () => {
    slack.conversations.set("C200", { name: "general" });
    const raw = JSON.stringify(
      slack.envelope({
        type: "app_mention",
        channel: "C200",
        user: OWNER,
        text: `<@${slack.botUserId}> ping sl`,
        ts: slack.nextTs(),
      }),
    );
    const sent = await fetch(hook, { method: "POST", headers: signSlackRequest(SECRET, raw), body: raw });
    expect(sent.status).toBe(200);
    const request = await eventually(
      () =>
        slack.calls.find(
          (c) => c.method === "chat.postMessage" && c.ok && String(c.args.text).includes("Approval needed"),
        ),
      500,
      20,
    );
    const blocks = JSON.parse(request.args.blocks ?? "[]") as Array<{
      type: string;
      elements?: Array<{ action_id: string; value: string; text: { text: string }; style?: string }>;
    }>;
    expect(blocks.map((b) => b.type)).toEqual(["section", "actions"]);
    const buttons = blocks[1]?.elements ?? [];
    expect(buttons.map((b) => b.text.text)).toEqual(["Allow once", "Allow always", "Deny"]);
    expect(buttons[2]?.style).toBe("danger");
    const list = await t.rpc("approvals.list", {});
    expect(list.result.approvals).toHaveLength(1);
    const id = list.result.approvals[0].id as string;
    const once = `ap:${id}:once`;
    expect(buttons.map((b) => b.action_id)).toEqual([once, `ap:${id}:always`, `ap:${id}:deny`]);
    expect(buttons.every((b) => b.value === b.action_id)).toBe(true);
    const ts = String(request.result?.ts);
    // the ts Slack gave the request is the one the outbox recorded
    const mark = await eventually(
      async () => (await t.app.services.store.outbox.get(`approval:${id}#0`))?.messageIds?.[0],
      500,
      20,
    );
    expect(mark).toBe(ts);

    expect((await press("C200", STRANGER, ts, once)).notice).toMatch(/Not yours/);
    expect((await press("C200", OWNER, ts, "ap:forged")).notice).toMatch(/not one of ours/);
    expect((await press("C200", OWNER, ts, once, { value: "ap:other" })).notice).toMatch(/not valid/);
    expect((await press("C999", OWNER, ts, once)).notice).toMatch(/another chat/);
    // a captured press replayed later: its signed timestamp is too old (and a bad signature fails)
    const stale = Math.floor(Date.now() / 1000) - 600;
    expect((await press("C200", OWNER, ts, once, { timestampS: stale })).status).toBe(401);
    expect((await press("C200", OWNER, ts, once, { secret: "not-the-secret" })).status).toBe(401);
    expect((await t.rpc("approvals.list", {})).result.approvals).toHaveLength(1);
    expect(slack.updates).toHaveLength(0);

    expect((await press("C200", OWNER, ts, once)).notice).toBe("Allowed once.");
    const update = await eventually(
      () => slack.calls.find((c) => c.method === "chat.update" && c.args.ts === ts),
      500,
      20,
    );
    expect(String(update.args.text)).toContain("Allowed once by slack:U1");
    const after = JSON.parse(update.args.blocks ?? "[]") as Array<{ type: string }>;
    expect(after.map((b) => b.type)).toEqual(["section"]);
    await eventually(() => slack.posted().find((p) => p.text.startsWith("done:")), 500, 20);
    // the same press again (freshly signed, as a second gateway or a double click would see it)
    expect((await press("C200", OWNER, ts, once)).notice).toMatch(/already decided/);
    // the a2a reply-back turns that follow the send may land on the target meanwhile
    expect((await userMessages(t.rpc)).filter((c) => c === "sl")).toEqual(["sl"]);
  });
}

describe("approvals on slack (fs store, local queue)", () => approvalsOnSlack("local"));
describeRedis("approvals on slack (redis, bullmq: a worker runs the turn)", () => approvalsOnSlack("bullmq"));
