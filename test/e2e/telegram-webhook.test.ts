import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeTelegram } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * Telegram webhook mode through the whole gateway (API.md §4): `POST /hooks/telegram/<accountId>`
 * is outside bearer auth and verified by the `X-Telegram-Bot-Api-Secret-Token` header alone.
 */

const SECRET = "tg_hook-secret_1";
const MAX_WEBHOOK_BYTES = 4096;
let tg: FakeTelegram;
let t: TestApp;
let updateId = 1000;

beforeAll(async () => {
  tg = await FakeTelegram.start();
  t = await startTestApp(
    {
      gateway: { auth: { token: "gateway-token-for-rpc-only" }, maxWebhookBodyBytes: MAX_WEBHOOK_BYTES },
      models: { default: "s/echo", providers: { s: { kind: "scripted", rules: [] } } },
      channels: {
        telegram: {
          accounts: {
            hooked: { token: tg.token, apiRoot: tg.apiRoot, mode: "webhook", webhookSecret: SECRET },
          },
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

function dmUpdate(chatId: number, text: string, id = ++updateId): Record<string, unknown> {
  return {
    update_id: id,
    message: {
      message_id: id,
      date: 1_700_000_000,
      chat: { id: chatId, type: "private" },
      from: { id: chatId, is_bot: false, first_name: "Wes" },
      text,
    },
  };
}

async function post(path: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${t.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  return { status: res.status, text: await res.text() };
}

const withSecret = (secret = SECRET) => ({ "x-telegram-bot-api-secret-token": secret });
const sentTo = (chatId: number) => tg.sentMessages().filter((m) => m.chat_id === String(chatId));

describe("telegram webhook mode through the gateway", () => {
  it("an update with the secret is answered in its chat; no bearer token is needed", async () => {
    const r = await post(
      "/hooks/telegram/hooked",
      JSON.stringify(dmUpdate(301, "via webhook")),
      withSecret(),
    );
    expect(r.status).toBe(200);
    const reply = await eventually(() => sentTo(301).find((m) => m.text.includes("via webhook")), 500, 20);
    expect(reply.text).toContain("You said: via webhook");
  });

  it("a wrong or missing secret gets 401 whatever the body, and nothing reaches a model", async () => {
    const before = await t.app.services.store.sessions.count();
    const update = JSON.stringify(dmUpdate(302, "forged"));
    expect((await post("/hooks/telegram/hooked", update, withSecret("wrong"))).status).toBe(401);
    expect((await post("/hooks/telegram/hooked", update)).status).toBe(401);
    // A bearer token is not a webhook credential.
    expect(
      (await post("/hooks/telegram/hooked", update, { authorization: "Bearer gateway-token-for-rpc-only" }))
        .status,
    ).toBe(401);
    // The secret is checked before the body is looked at: an unverified caller learns nothing about parsing.
    expect((await post("/hooks/telegram/hooked", "{not json", withSecret("wrong"))).status).toBe(401);
    expect((await post("/hooks/telegram/hooked", "{not json")).status).toBe(401);
    // With the right secret, a body that is no Update is a 400.
    expect((await post("/hooks/telegram/hooked", "{not json", withSecret())).status).toBe(400);
    expect(await t.app.services.store.sessions.count()).toBe(before);
    expect(sentTo(302)).toHaveLength(0);
  });

  it("an account that is not configured (or not in webhook mode) has no webhook: 404", async () => {
    const update = JSON.stringify(dmUpdate(303, "nobody home"));
    expect((await post("/hooks/telegram/nosuch", update, withSecret())).status).toBe(404);
    expect(sentTo(303)).toHaveLength(0);
  });

  it("a redelivered update is answered once", async () => {
    const update = JSON.stringify(dmUpdate(304, "just once"));
    expect((await post("/hooks/telegram/hooked", update, withSecret())).status).toBe(200);
    expect((await post("/hooks/telegram/hooked", update, withSecret())).status).toBe(200);
    await post("/hooks/telegram/hooked", JSON.stringify(dmUpdate(304, "and then")), withSecret());
    await eventually(() => sentTo(304).find((m) => m.text.includes("and then")), 500, 20);
    expect(sentTo(304).filter((m) => m.text.includes("just once"))).toHaveLength(1);
  });

  it("a body over gateway.maxWebhookBodyBytes gets 413 naming that limit", async () => {
    const big = JSON.stringify({ ...dmUpdate(305, "x"), pad: "x".repeat(MAX_WEBHOOK_BYTES) });
    const r = await post("/hooks/telegram/hooked", big, withSecret());
    expect(r.status).toBe(413);
    expect(r.text).toContain(`gateway.maxWebhookBodyBytes is ${MAX_WEBHOOK_BYTES} bytes`);
  });
});
