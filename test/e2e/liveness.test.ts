import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_FAILURE_TEXT } from "../../src/config/schema.js";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { FakeTelegram } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * A Telegram DM through the whole gateway with a streaming OpenAI-compatible model: typing
 * starts and ends, the reply streams as one edited message whose last text is the stored reply,
 * `run.delta` events add up to it, and a model that drops mid-reply ends typing and posts the
 * short failure line (the technical cause stays in the run record).
 */

const USER = { id: 515, is_bot: false, first_name: "Rin" };
const DM = { id: USER.id, type: "private" as const };
const REPLY = "First words arrive early, then more of them follow, and finally the reply is complete.";

let tg: FakeTelegram;
let oa: OpenAIFake;
let t: TestApp;

beforeAll(async () => {
  tg = await FakeTelegram.start();
  oa = await startOpenAIFake();
  t = await startTestApp({
    models: {
      default: "oa/fake-model",
      providers: { oa: { kind: "openai", baseUrl: oa.url, maxRetries: 0 } },
    },
    channels: {
      telegram: {
        accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } },
        allowFrom: ["*"],
        failureText: "Sorry — that reply broke off. Try again?",
      },
    },
  });
});

afterAll(async () => {
  await t?.stop();
  await tg?.close();
  await oa?.close();
});

const toUser = () => tg.calls.filter((c) => String(c.payload.chat_id) === String(USER.id));

describe("a turn that feels alive", () => {
  it("types, streams one edited message, and ends with exactly the stored reply", async () => {
    // ~16 word chunks 120 ms apart: about 2 s of streaming, so the 1 s DM interval edits at least once.
    oa.enqueue({ text: REPLY, chunkDelayMs: 120 });
    const deltas: string[] = [];
    const typing: boolean[] = [];
    const offDelta = t.app.services.bus.on("run.delta", (d) => deltas.push(d.text));
    const offTyping = t.app.services.bus.on("run.typing", (d) => typing.push(d.on));
    const finished = new Promise<string>((resolve) => {
      const off = t.app.services.bus.on("run.finished", ({ run }) => {
        off();
        resolve(run.runId);
      });
    });
    tg.pushMessage(DM, USER, { text: "tell me something" });
    await finished;
    offDelta();
    offTyping();

    expect(oa.requests.at(-1)?.body.stream).toBe(true);
    expect(deltas.length).toBeGreaterThan(5);
    expect(deltas.join("")).toBe(REPLY);
    expect(typing).toEqual([true, false]);
    expect(toUser().some((c) => c.method === "sendChatAction")).toBe(true);

    const sends = toUser().filter((c) => c.method === "sendMessage" && c.ok);
    expect(sends).toHaveLength(1);
    const edits = toUser().filter((c) => c.method === "editMessageText" && c.ok);
    expect(edits.length).toBeGreaterThanOrEqual(1);
    const history = await t.rpc<{ messages: Array<{ role: string; content: unknown }> }>("sessions.history", {
      sessionKey: "agent:main:main",
      limit: 5,
    });
    const stored = history.result?.messages.filter((m) => m.role === "assistant").at(-1)?.content;
    expect(stored).toBe(REPLY);
    expect(edits.at(-1)?.payload.text).toBe(stored);
    expect(edits.every((e) => e.payload.message_id === edits[0]?.payload.message_id)).toBe(true);
  });

  it("a model that drops mid-reply ends typing and posts one short line; the cause is on the run", async () => {
    oa.enqueue({
      text: "This answer starts but never finishes because the link drops",
      dropAfterEvents: 4,
      chunkDelayMs: 20,
    });
    const typing: boolean[] = [];
    const offTyping = t.app.services.bus.on("run.typing", (d) => typing.push(d.on));
    const finished = new Promise<{ status: string; error?: string }>((resolve) => {
      const off = t.app.services.bus.on("run.finished", ({ run }) => {
        off();
        resolve(run);
      });
    });
    const before = toUser().length;
    tg.pushMessage(DM, USER, { text: "and now?" });
    const run = await finished;
    offTyping();
    expect(run.status).toBe("error");
    expect(run.error).toContain("dropped the connection mid-reply");
    expect(typing).toEqual([true, false]);
    const line = await eventually(
      () =>
        toUser()
          .slice(before)
          .find((c) => c.method === "sendMessage" && String(c.payload.text).includes("broke off")),
      300,
      10,
    );
    expect(line.payload.text).toBe("Sorry — that reply broke off. Try again?");
    const later = toUser()
      .slice(before)
      .filter((c) => c.method === "sendMessage" && c.ok);
    expect(later.filter((c) => String(c.payload.text).includes("broke off"))).toHaveLength(1);
    for (const c of later) {
      expect(String(c.payload.text)).not.toMatch(/at .*\.ts|Error:|HTTP|ECONN/);
    }
    expect(DEFAULT_FAILURE_TEXT).not.toMatch(/error|stack/i);
  });
});
