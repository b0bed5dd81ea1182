import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ApprovalsDriver,
  startApprovalsApp,
  telegramChannels,
  userMessages,
} from "../approvals-fixture.js";
import { FakeTelegram } from "../fakes/telegram.js";
import type { TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { describeRedis } from "../redis.js";

/**
 * Approvals on Telegram through the real grammY adapter and the loopback Bot API: the request
 * has an inline keyboard, a press is a callback_query answered with the notice
 * (answerCallbackQuery), a stranger's press, a forged callback and a press from another chat
 * change nothing, the owner's press resumes the run, and the request is edited to say who
 * decided, without its keyboard. On both drivers: on bullmq the turn waits on a worker while the
 * press lands on the gateway.
 */

const OWNER = { id: 42, is_bot: false, first_name: "Olivia" };
const STRANGER = { id: 77, is_bot: false, first_name: "Sam" };

function approvalsOnTelegram(driver: ApprovalsDriver): void {
  let tg: FakeTelegram;
  let t: TestApp;

  beforeAll(async () => {
    tg = await FakeTelegram.start();
    t = await startApprovalsApp({ channels: telegramChannels(tg, OWNER.id) }, { listen: true, driver });
  }, 30_000);

  afterAll(async () => {
    await t?.stop();
    await tg?.close();
  });

  const answers = () => tg.calls.filter((c) => c.method === "answerCallbackQuery");
  const answerOf = async (id: string) =>
    (await eventually(() => answers().find((c) => c.payload.callback_query_id === id), 500, 20)).payload.text;

  it("inline keyboard, callback answers, the owner's press resumes the run, the request is edited", {
    timeout: 30_000,
  }, async () => {
    const dm = { id: OWNER.id, type: "private" as const };
    tg.pushMessage(dm, OWNER, { text: "ping tg" });
    const request = await eventually(
      () =>
        tg.calls.find(
          (c) => c.method === "sendMessage" && c.ok && String(c.payload.text).includes("Approval needed"),
        ),
      500,
      20,
    );
    const markup = request.payload.reply_markup as {
      inline_keyboard: Array<Array<{ text: string; callback_data: string }>>;
    };
    const row = markup.inline_keyboard[0]!;
    expect(row.map((b) => b.text)).toEqual(["Allow once", "Allow always", "Deny"]);
    const data = row.map((b) => b.callback_data);
    const list = await t.rpc("approvals.list", {});
    expect(list.result.approvals).toHaveLength(1);
    const id = list.result.approvals[0].id as string;
    expect(data[0]).toBe(`ap:${id}:once`);
    // the message id Telegram gave the request: the one our outbox recorded
    // (the mark is written just after Telegram answers the send)
    const mark = await eventually(
      async () => {
        const m = await t.app.services.store.outbox.get(`approval:${id}#0`);
        return m?.messageIds?.length ? m : undefined;
      },
      500,
      20,
    );
    const mid = Number(mark?.messageIds?.[0]);
    expect(mid).toBeGreaterThan(0);

    expect(await answerOf(tg.pushCallback(dm, STRANGER, mid, data[0]!))).toMatch(/Not yours/);
    expect(await answerOf(tg.pushCallback(dm, OWNER, mid, "ap:forged"))).toMatch(/not one of ours/);
    expect(await answerOf(tg.pushCallback({ id: 99, type: "private" }, OWNER, mid, data[0]!))).toMatch(
      /another chat/,
    );
    expect((await t.rpc("approvals.list", {})).result.approvals).toHaveLength(1);

    expect(await answerOf(tg.pushCallback(dm, OWNER, mid, data[0]!))).toBe("Allowed once.");
    const edit = await eventually(
      () => tg.calls.find((c) => c.method === "editMessageText" && Number(c.payload.message_id) === mid),
      500,
      20,
    );
    expect(String(edit.payload.text)).toContain("Allowed once by telegram:42 (Olivia)");
    expect(edit.payload.reply_markup).toEqual({ inline_keyboard: [] });
    await eventually(() => tg.sentMessages().find((m) => String(m.text).startsWith("done:")), 500, 20);
    expect(await answerOf(tg.pushCallback(dm, OWNER, mid, data[2]!))).toMatch(/already decided/);
    // the a2a reply-back turns that follow the send may land on the target meanwhile
    expect((await userMessages(t.rpc)).filter((c) => c === "tg")).toEqual(["tg"]);
  });
}

describe("approvals on telegram (fs store, local queue)", () => approvalsOnTelegram("local"));
describeRedis("approvals on telegram (redis, bullmq: a worker runs the turn)", () =>
  approvalsOnTelegram("bullmq"),
);
