import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeSlack, signSlackRequest } from "../fakes/slack.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/** The whole gateway with the Slack adapter in HTTP mode, events posted to the gateway's own port. */

const SECRET = "slack-signing-secret-123";
let slack: FakeSlack;
let t: TestApp;
let hook: string;

beforeAll(async () => {
  slack = await FakeSlack.start();
  t = await startTestApp(
    {
      models: {
        default: "s/echo",
        providers: {
          s: {
            kind: "scripted",
            rules: [{ match: "^hi (.+)$", reply: "**hello** $1, see [docs](https://example.com)" }],
          },
        },
      },
      channels: {
        slack: {
          accounts: {
            default: { botToken: slack.botToken, signingSecret: SECRET, mode: "http", apiUrl: slack.apiUrl },
          },
          // These tests are about delivery; DM pairing has its own test (pairing.test.ts).
          allowFrom: ["*"],
        },
      },
    },
    { listen: true },
  );
  hook = `http://127.0.0.1:${t.app.address?.port}/hooks/slack/default/events`;
});

afterAll(async () => {
  await t?.stop();
  await slack?.close();
});

async function post(body: Record<string, unknown>, sign = SECRET) {
  const raw = JSON.stringify(body);
  const res = await fetch(hook, { method: "POST", headers: signSlackRequest(sign, raw), body: raw });
  return { status: res.status, body: await res.text() };
}

describe("slack through the gateway (HTTP mode)", () => {
  it("answers URL verification", async () => {
    const r = await post({ type: "url_verification", challenge: "abc123", token: "x" });
    expect(r.status).toBe(200);
    expect(r.body).toContain("abc123");
  });

  it("a DM is answered in the same conversation, rendered as mrkdwn", async () => {
    slack.conversations.set("D100", { is_im: true });
    const ts = slack.nextTs();
    const r = await post(
      slack.envelope({
        type: "message",
        channel: "D100",
        channel_type: "im",
        user: "U1",
        text: "hi there",
        ts,
      }),
    );
    expect(r.status).toBe(200);
    const reply = await eventually(
      () => slack.posted().find((p) => p.channel === "U1" || p.channel === "D100"),
      500,
      20,
    );
    expect(reply.text).toContain("*hello*");
    expect(reply.text).toContain("<https://example.com|docs>");
  });

  it("a thread gets its own session and the reply lands in the thread", async () => {
    slack.conversations.set("C200", { name: "general" });
    const root = slack.nextTs();
    const ts = slack.nextTs();
    await post(
      slack.envelope({
        type: "app_mention",
        channel: "C200",
        user: "U2",
        text: `<@${slack.botUserId}> hi thread`,
        ts,
        thread_ts: root,
      }),
    );
    const reply = await eventually(() => slack.posted().find((p) => p.channel === "C200"), 500, 20);
    expect(reply.thread_ts).toBe(root);
    const key = `agent:main:slack:channel:c200:thread:${root}`;
    expect(await t.app.services.store.sessions.get(key)).not.toBeNull();
  });

  it("a bad signature gets 401 and never reaches a model", async () => {
    slack.conversations.set("D300", { is_im: true });
    const before = await t.app.services.store.sessions.count();
    const r = await post(
      slack.envelope({
        type: "message",
        channel: "D300",
        channel_type: "im",
        user: "U3",
        text: "hi forged",
        ts: slack.nextTs(),
      }),
      "wrong-secret",
    );
    expect(r.status).toBe(401);
    expect(await t.app.services.store.sessions.count()).toBe(before);
    expect(slack.posted().some((p) => p.channel === "D300" || p.channel === "U3")).toBe(false);
  });

  it("a retried event is processed once", async () => {
    slack.conversations.set("D400", { is_im: true });
    const env = slack.envelope({
      type: "message",
      channel: "D400",
      channel_type: "im",
      user: "U4",
      text: "hi once",
      ts: slack.nextTs(),
    });
    expect((await post(env)).status).toBe(200);
    const raw = JSON.stringify(env);
    const retry = await fetch(hook, {
      method: "POST",
      headers: {
        ...signSlackRequest(SECRET, raw),
        "x-slack-retry-num": "1",
        "x-slack-retry-reason": "http_timeout",
      },
      body: raw,
    });
    expect(retry.status).toBe(200);
    await eventually(() => slack.posted().find((p) => p.channel === "D400" || p.channel === "U4"), 500, 20);
    await post(
      slack.envelope({
        type: "message",
        channel: "D400",
        channel_type: "im",
        user: "U4",
        text: "hi after",
        ts: slack.nextTs(),
      }),
    );
    await eventually(
      () =>
        slack.posted().find((p) => (p.channel === "D400" || p.channel === "U4") && p.text.includes("after")),
      500,
      20,
    );
    expect(
      slack.posted().filter((p) => (p.channel === "D400" || p.channel === "U4") && p.text.includes("once")),
    ).toHaveLength(1);
  });
});
