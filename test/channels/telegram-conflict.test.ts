import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTelegramChannel, type TelegramChannel } from "../../channels/telegram/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { FakeTelegram, type FakeUser } from "../fakes/telegram.js";
import { eventually } from "../helpers.js";

/**
 * Issue 50, the reproduction: two processes polling one bot token against a Bot API that, like
 * Telegram, answers 409 to a second concurrent getUpdates. The second poller used to stop for
 * good on the 409; now it retries with backoff (one warning a minute), so when the first one goes
 * away the second one takes over and messages are answered again.
 */

const ADA: FakeUser = { id: 4242, is_bot: false, first_name: "Ada", username: "ada" };
const DM = { id: 4242, type: "private" as const };

function logSink(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString("utf8").split("\n")) if (l.trim()) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { logger: pino({ level: "info" }, stream), lines };
}

describe("telegram: two pollers on one token (409 Conflict)", () => {
  let fake: FakeTelegram;
  const adapters: TelegramChannel[] = [];

  beforeEach(async () => {
    fake = await FakeTelegram.start(undefined, { exclusivePolling: true });
  });

  afterEach(async () => {
    for (const a of adapters.splice(0)) await a.stop();
    await fake.close();
  });

  function make(logger: pino.Logger): TelegramChannel {
    const a = createTelegramChannel(
      { accountId: "default", token: fake.token, apiRoot: fake.apiRoot, pollingTimeoutSeconds: 5 },
      { logger },
    );
    adapters.push(a);
    return a;
  }

  it("the second poller retries its 409s, warns once a minute, and takes over when the first stops", {
    timeout: 15_000,
  }, async () => {
    const seenA: InboundMessage[] = [];
    const seenB: InboundMessage[] = [];
    const first = make(logSink().logger);
    await first.start(async (m) => {
      seenA.push(m);
    });
    await eventually(() => fake.calls.some((c) => c.method === "getUpdates"));
    const b = logSink();
    const second = make(b.logger);
    await second.start(async (m) => {
      seenB.push(m);
    });
    // Several 409s (1 s, 2 s backoff): still polling, one warning for all of them.
    await eventually(() => (fake.conflicts >= 2 ? true : undefined), 8000);
    expect(second.status().state).toBe("reconnecting");
    expect(second.status().detail).toMatch(/409 conflict/);
    const warnings = b.lines.filter((l) => l.level === 40 && /409 Conflict/.test(String(l.msg)));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]?.msg)).toMatch(/storage.driver "redis"/);
    // The first poller goes away (as a killed gateway would): the second one answers from now on.
    await first.stop();
    adapters.shift();
    fake.pushMessage(DM, ADA, { text: "after the first one left" });
    await eventually(() => seenB.find((m) => m.text === "after the first one left"), 8000);
    expect(second.status().state).toBe("connected");
    expect(seenA.map((m) => m.text)).not.toContain("after the first one left");
  });
});
