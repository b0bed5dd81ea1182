import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import { CODE_ALPHABET } from "../../src/routing/pairing.js";
import { FakeSlack, signSlackRequest } from "../fakes/slack.js";
import { FakeTelegram } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually, rpcOverHttp, tempDir } from "../helpers.js";

/**
 * DM pairing end to end (API.md §7): with the default `dmPolicy: "pairing"`, a stranger's DM gets
 * a one-time code and never reaches the model; the owner approves it (`/pair CODE` in the chat,
 * or RPC `pairing.approve`), after which the same sender is answered. Real grammY and the Slack
 * adapter against the loopback fakes.
 */

const echo: Partial<ConfigInput> = {
  models: {
    default: "s/echo",
    providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "model heard: $1" }] } },
  },
};
const CODE_RE = new RegExp(`Pairing code: ([${CODE_ALPHABET}]{8})`);

describe("pairing on telegram", () => {
  const OWNER = { id: 42, is_bot: false, first_name: "Olivia" };
  const STRANGER = { id: 77, is_bot: false, first_name: "Sam" };
  let tg: FakeTelegram;
  let t: TestApp;
  const sent = (chatId: number) => tg.sentMessages().filter((m) => m.chat_id === String(chatId));

  beforeAll(async () => {
    tg = await FakeTelegram.start();
    t = await startTestApp(
      {
        ...echo,
        channels: {
          telegram: {
            accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } },
            owners: [String(OWNER.id)],
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

  it("a stranger gets a code and nothing reaches the model; /pair from the owner lets them in", async () => {
    expect(t.app.services.config.channels.telegram?.dmPolicy).toBe("pairing");
    expect(t.app.services.config.channels.telegram?.allowFrom).toEqual([]);
    tg.pushMessage({ id: STRANGER.id, type: "private" }, STRANGER, { text: "my PIN is 9911-kestrel" });
    const codeMsg = await eventually(() => sent(STRANGER.id).find((m) => CODE_RE.test(m.text)), 500, 20);
    const code = CODE_RE.exec(codeMsg.text)?.[1] ?? "";
    expect(codeMsg.text).toContain("Your Telegram user id: 77");
    expect(codeMsg.text).toContain(`switchboard pairing approve telegram ${code}`);

    // A second message: no new code, still nothing for the model. The owner is always let in.
    tg.pushMessage({ id: STRANGER.id, type: "private" }, STRANGER, { text: "hello?" });
    tg.pushMessage({ id: OWNER.id, type: "private" }, OWNER, { text: "owner here" });
    await eventually(() => sent(OWNER.id).find((m) => m.text.includes("model heard: owner here")), 500, 20);
    const listed = await rpcOverHttp(t.url ?? "", { token: t.token ?? "" }, "pairing.list", {});
    expect(listed.result.requests).toEqual([
      {
        channel: "telegram",
        accountId: "default",
        senderId: "77",
        code,
        createdAt: expect.any(Number),
        senderName: expect.any(String),
      },
    ]);
    expect(listed.result.approved).toEqual([]);
    const keys = (await t.app.services.store.sessions.list({})).map((s) => s.key);
    expect(keys.some((k) => k.includes("77"))).toBe(false);
    const history = await t.rpc("sessions.history", { sessionKey: "main" });
    // The stranger's words are in no message (a bare "9911" could be part of a timestamp or an id).
    expect(JSON.stringify(history.result)).not.toContain("kestrel");
    expect(JSON.stringify(history.result)).toContain("owner here");

    // A stranger's /pair is not a command for them (and never reaches a model).
    tg.pushMessage({ id: STRANGER.id, type: "private" }, STRANGER, { text: `/pair ${code}` });
    // The owner approves from the chat.
    tg.pushMessage({ id: OWNER.id, type: "private" }, OWNER, { text: `/pair ${code.toLowerCase()}` });
    await eventually(
      () => sent(OWNER.id).find((m) => m.text.includes("Approved: telegram user 77")),
      500,
      20,
    );
    expect(sent(STRANGER.id).filter((m) => CODE_RE.test(m.text))).toHaveLength(1);
    expect(sent(STRANGER.id).some((m) => m.text.includes("model heard"))).toBe(false);

    tg.pushMessage({ id: STRANGER.id, type: "private" }, STRANGER, { text: "now let me in" });
    await eventually(
      () => sent(STRANGER.id).find((m) => m.text.includes("model heard: now let me in")),
      500,
      20,
    );
    const after = await t.rpc("pairing.list", { channel: "telegram" });
    expect(after.result).toMatchObject({ requests: [], approved: [{ channel: "telegram", senderId: "77" }] });
  });
});

describe("pairing on slack (HTTP mode)", () => {
  const SECRET = "slack-signing-secret-123";
  let slack: FakeSlack;
  let t: TestApp;
  const dir = tempDir();
  const config = (): Partial<ConfigInput> => ({
    ...echo,
    channels: {
      slack: {
        accounts: {
          default: { botToken: slack.botToken, signingSecret: SECRET, mode: "http", apiUrl: slack.apiUrl },
        },
      },
    },
  });

  async function dm(user: string, channel: string, text: string) {
    slack.conversations.set(channel, { is_im: true });
    const raw = JSON.stringify(
      slack.envelope({ type: "message", channel, channel_type: "im", user, text, ts: slack.nextTs() }),
    );
    const res = await fetch(`${t.url}/hooks/slack/default/events`, {
      method: "POST",
      headers: signSlackRequest(SECRET, raw),
      body: raw,
    });
    expect(res.status).toBe(200);
  }
  const postedTo = (user: string, channel: string) =>
    slack.posted().filter((p) => p.channel === user || p.channel === channel);

  beforeAll(async () => {
    slack = await FakeSlack.start();
    t = await startTestApp(config(), { listen: true, dir: dir.dir });
  });
  afterAll(async () => {
    await t?.stop();
    await slack?.close();
    dir.cleanup();
  });

  it("approve and deny over RPC; an approval survives a restart", async () => {
    await dm("U9", "D9", "hi from a stranger");
    const codeMsg = await eventually(() => postedTo("U9", "D9").find((p) => CODE_RE.test(p.text)), 500, 20);
    const code = CODE_RE.exec(codeMsg.text)?.[1] ?? "";
    expect(codeMsg.text).toContain("Your Slack user id: U9");

    await dm("U8", "D8", "another stranger");
    const other = await eventually(() => postedTo("U8", "D8").find((p) => CODE_RE.test(p.text)), 500, 20);
    const otherCode = CODE_RE.exec(other.text)?.[1] ?? "";

    const auth = { token: t.token ?? "" };
    const wrong = await rpcOverHttp(t.url ?? "", auth, "pairing.approve", { channel: "telegram", code });
    expect(wrong.error.code).toBe("NOT_FOUND");
    const bad = await rpcOverHttp(t.url ?? "", auth, "pairing.approve", { channel: "slack" });
    expect(bad.error.code).toBe("INVALID_PARAMS");
    expect(bad.error.message).toContain("code");
    expect(await rpcOverHttp(t.url ?? "", auth, "pairing.approve", { channel: "slack", code })).toMatchObject(
      {
        ok: true,
        result: { ok: true, senderId: "U9" },
      },
    );
    // Channel names are compared lower-cased (SEMANTICS §1), as people type them on the CLI.
    expect(
      await rpcOverHttp(t.url ?? "", auth, "pairing.deny", { channel: "Slack", code: otherCode }),
    ).toMatchObject({ ok: true, result: { ok: true, senderId: "U8" } });
    const listed = await t.rpc("pairing.list", {});
    expect(listed.result.requests).toEqual([]);
    expect(listed.result.approved).toMatchObject([
      { channel: "slack", accountId: "default", senderId: "U9" },
    ]);

    await dm("U9", "D9", "approved now");
    await eventually(
      () => postedTo("U9", "D9").find((p) => p.text.includes("model heard: approved now")),
      500,
      20,
    );
    expect(postedTo("U8", "D8").some((p) => p.text.includes("model heard"))).toBe(false);

    // Approvals live in the store: a restarted gateway on the same state still knows U9.
    await t.stop();
    t = await startTestApp(config(), { listen: true, dir: dir.dir });
    expect((await t.rpc("pairing.list", { channel: "SLACK" })).result.approved).toMatchObject([
      { senderId: "U9" },
    ]);
    await dm("U9", "D9", "after restart");
    await eventually(
      () => postedTo("U9", "D9").find((p) => p.text.includes("model heard: after restart")),
      500,
      20,
    );
  });
});
