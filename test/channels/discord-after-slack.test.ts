/**
 * A gateway with Slack and Discord: Slack's socket mode loads undici 7, which installs its own
 * Agent as the process's global dispatcher when it is loaded first; discord.js's REST (undici 6)
 * then sent every file through that Agent, and each upload failed with "action is not a
 * function" (the two undici versions read a FormData body differently). This file loads Slack
 * first, as a gateway whose Slack channel starts before its Discord channel does; it runs in a
 * process of its own (vitest.config.ts), where nothing loaded undici before it.
 */
import "@slack/socket-mode";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDiscordChannel, type DiscordChannel } from "../../channels/discord/index.js";
import { silentLogger } from "../../src/log.js";
import { FakeDiscord } from "../fakes/discord.js";
import { outboundFile, TestMediaSink } from "../fakes/media-sink.js";

describe("discord after slack (undici 7 loaded first)", () => {
  let fake: FakeDiscord;
  let adapter: DiscordChannel;
  let sink: TestMediaSink;

  beforeAll(async () => {
    fake = await FakeDiscord.start();
    fake.addUser("ada");
    sink = new TestMediaSink(300);
    adapter = createDiscordChannel(
      { accountId: "default", token: fake.token, apiUrl: fake.apiUrl },
      { logger: silentLogger() },
    );
    await adapter.start(async () => {}, { media: sink });
  });

  afterAll(async () => {
    await adapter.stop();
    await fake.close();
    sink.cleanup();
  });

  it("the process's global dispatcher is undici 7's (the case this file is about)", () => {
    const global = (globalThis as Record<symbol, unknown>)[Symbol.for("undici.globalDispatcher.2")];
    expect(global).toBeDefined();
  });

  it("sends a file and a text", async () => {
    const png = randomBytes(2500);
    const res = await adapter.send({
      accountId: "default",
      to: fake.textChannelId,
      text: "the chart",
      format: "native",
      attachments: [outboundFile(png, { kind: "image", mimeType: "image/png", name: "chart.png" })],
    });
    expect(res.messageIds).toHaveLength(1);
    const sent = fake.sent.at(-1);
    expect(sent?.body.content).toBe("the chart");
    expect(sent?.files?.map((f) => f.bytes.equals(png))).toEqual([true]);
  });
});
