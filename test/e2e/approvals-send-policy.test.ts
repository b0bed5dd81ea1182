import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApprovalsApp, telegramChannels, userMessages } from "../approvals-fixture.js";
import { FakeTelegram } from "../fakes/telegram.js";
import type { TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { seedSession } from "../integration/tools/seed-sessions.js";

/**
 * An approval request obeys the chat's send policy (docs/approvals.md, "Where the agent may not
 * send"): a run in a Telegram group where `session.sendPolicy` denies sending (here started by a
 * webhook) asks for approval; the group gets nothing — no request, no buttons — and the owner
 * is told in a direct message, with the `/approve` line, from where they decide. The run then
 * resumes and the tool runs once; the group still got nothing.
 */

const OWNER = { id: 42, is_bot: false, first_name: "Olivia" };
const GROUP_ID = -1001234;
const GROUP_KEY = `agent:main:telegram:group:${GROUP_ID}`;
const HOOK_TOKEN = "hook-secret-approvals-0123456789";

let tg: FakeTelegram;
let t: TestApp;

beforeAll(async () => {
  tg = await FakeTelegram.start();
  t = await startApprovalsApp(
    {
      channels: telegramChannels(tg, OWNER.id),
      session: {
        sendPolicy: { rules: [{ match: { channel: "telegram", chatType: "group" }, action: "deny" }] },
      },
      hooks: { enabled: true, token: HOOK_TOKEN, allowAnySessionKey: true },
    },
    // a hook's message reaches the model inside the hook's frame: match it unanchored
    { listen: true, match: "ping (\\w+)" },
  );
  // the group's session, as its first message left it: its chat is the group
  await seedSession(t, GROUP_KEY, {
    chatType: "group",
    channel: "telegram",
    deliveryContext: { channel: "telegram", to: String(GROUP_ID), accountId: "default" },
  });
});

afterAll(async () => {
  await t?.stop();
  await tg?.close();
});

const sentTo = (chatId: number) =>
  tg.calls.filter((c) => c.method.startsWith("send") && String(c.payload.chat_id) === String(chatId));

describe("approval requests and the send policy", () => {
  it("a run in a group the agent may not send to: no request in the group, the owner decides from a DM", {
    timeout: 30_000,
  }, async () => {
    const hook = await fetch(`${t.url}/hooks/agent`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${HOOK_TOKEN}` },
      body: JSON.stringify({ message: "ping grp", sessionKey: GROUP_KEY }),
    });
    expect(hook.status).toBe(200);
    const { runId } = (await hook.json()) as { runId: string };

    const pending = await eventually(
      async () => {
        const r = await t.rpc("approvals.list", {});
        return r.result.approvals.length ? r.result.approvals : undefined;
      },
      500,
      20,
    );
    expect(pending).toMatchObject([{ sessionKey: GROUP_KEY, runId, tool: "sessions_send" }]);
    const id = pending[0].id as string;
    expect((await t.rpc("runs.get", { runId })).result).toMatchObject({
      status: "waiting",
      waitingFor: { approvalId: id },
    });

    // the owner is told privately, with the /approve line and no buttons (a press in the DM is
    // not the request's chat); the text says why the group did not get it
    const dm = await eventually(
      () => sentTo(OWNER.id).find((c) => String(c.payload.text).includes("Approval needed")),
      500,
      20,
    );
    const text = String(dm.payload.text);
    expect(text).toContain(id);
    expect(text).toContain("sessions_send");
    expect(text).toContain(`/approve ${id} allow-once|allow-always|deny`);
    expect(text).toMatch(/may not send/);
    expect(dm.payload.reply_markup).toBeUndefined();
    expect(sentTo(GROUP_ID)).toEqual([]);

    // the owner decides from the DM; the run resumes and the tool runs once
    tg.pushMessage({ id: OWNER.id, type: "private" }, OWNER, { text: `/approve ${id} allow-once` });
    await eventually(
      () => sentTo(OWNER.id).find((c) => String(c.payload.text).includes("Allowed once")),
      500,
      20,
    );
    const done = await t.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result).toMatchObject({ status: "ok" });
    expect(done.result.reply).toContain("done:");
    expect((await userMessages(t.rpc)).filter((c) => c === "grp")).toEqual(["grp"]);
    expect((await t.rpc("approvals.list", {})).result.approvals).toEqual([]);
    // one notice to the owner, nothing ever in the group
    expect(sentTo(OWNER.id).filter((c) => String(c.payload.text).includes("Approval needed"))).toHaveLength(
      1,
    );
    expect(sentTo(GROUP_ID)).toEqual([]);
  });

  it("a chat whose own override says deny (/send off): the owner is told and denies; the model gets denied", {
    timeout: 30_000,
  }, async () => {
    const ada = 5150;
    const adaKey = `agent:main:telegram:direct:${ada}`;
    await seedSession(t, adaKey, {
      chatType: "direct",
      channel: "telegram",
      deliveryContext: { channel: "telegram", to: String(ada), accountId: "default" },
    });
    expect((await t.rpc("sessions.patch", { sessionKey: adaKey, patch: { sendPolicy: "deny" } })).ok).toBe(
      true,
    );
    const hook = await fetch(`${t.url}/hooks/agent`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${HOOK_TOKEN}` },
      body: JSON.stringify({ message: "ping ada", sessionKey: adaKey }),
    });
    const { runId } = (await hook.json()) as { runId: string };
    const dm = await eventually(
      () =>
        sentTo(OWNER.id).find(
          (c) =>
            String(c.payload.text).includes("Approval needed") && String(c.payload.text).includes(adaKey),
        ),
      500,
      20,
    );
    const id = /Request (ap_[0-9a-f]{20})/.exec(String(dm.payload.text))?.[1] ?? "";
    expect((await t.rpc("runs.get", { runId })).result.waitingFor?.approvalId).toBe(id);
    tg.pushMessage({ id: OWNER.id, type: "private" }, OWNER, { text: `/approve ${id} deny` });
    const done = await t.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result.reply).toContain('"status":"denied"');
    expect(done.result.reply).toContain('"reason":"denied"');
    expect(await userMessages(t.rpc)).not.toContain("ada");
    expect(sentTo(ada)).toEqual([]);
  });
});
