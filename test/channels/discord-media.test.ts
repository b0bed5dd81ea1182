import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createDiscordChannel, type DiscordChannel } from "../../channels/discord/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { silentLogger } from "../../src/log.js";
import { FakeDiscord, type FakeDiscordUser } from "../fakes/discord.js";
import { type LoopbackServer, loopbackServer } from "../fakes/http.js";
import { outboundFile, TestMediaSink } from "../fakes/media-sink.js";
import { eventually } from "../helpers.js";

describe("discord media (discord.js against the loopback Discord)", () => {
  let fake: FakeDiscord;
  let adapter: DiscordChannel;
  let ada: FakeDiscordUser;
  let sink: TestMediaSink;
  let inbound: InboundMessage[];
  let elsewhere: LoopbackServer;
  let elsewhereHits: number;

  beforeEach(async () => {
    inbound = [];
    elsewhereHits = 0;
    fake = await FakeDiscord.start();
    ada = fake.addUser("ada");
    elsewhere = await loopbackServer((_req, res) => {
      elsewhereHits++;
      res.end("x");
    });
    sink = new TestMediaSink(300);
    adapter = createDiscordChannel(
      { accountId: "default", token: fake.token, apiUrl: fake.apiUrl },
      { logger: silentLogger() },
    );
    await adapter.start(
      async (m) => {
        inbound.push(m);
      },
      { media: sink },
    );
  });

  afterEach(async () => {
    await adapter.stop();
    await fake.close();
    await elsewhere.close();
    sink.cleanup();
  });

  it("several attachments are one message; each fetched from its URL without credentials", async () => {
    const png = randomBytes(5000);
    const txt = randomBytes(700);
    fake.message(fake.dmChannelOf(ada), ada, "have a look", {
      attachments: [
        fake.attachment(png, "cat.png", "image/png", { width: 640, height: 480 }),
        fake.attachment(txt, "notes.txt", "text/plain; charset=utf-8"),
      ],
    });
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.text).toBe("have a look");
    expect(msg.parts?.map((p) => p.type)).toEqual(["image", "file"]);
    expect(sink.bytesOf(msg.parts?.[0])?.equals(png)).toBe(true);
    expect(sink.bytesOf(msg.parts?.[1])?.equals(txt)).toBe(true);
    expect(sink.calls[0]?.attachments[0]).toMatchObject({ width: 640, height: 480, bytes: 5000 });
    expect(fake.attachmentRequests.map((r) => r.authorization)).toEqual([undefined, undefined]);
    expect(sink.calls[0]?.maxBytes).toBe(25 * 1024 * 1024);
  });

  it("a voice message (flag IS_VOICE_MESSAGE) is a voice note with its duration", async () => {
    const ogg = randomBytes(3000);
    fake.message(fake.dmChannelOf(ada), ada, "", {
      flags: 8192,
      attachments: [
        fake.attachment(ogg, "voice-message.ogg", "audio/ogg", { duration_secs: 3.2, waveform: "AAAA" }),
      ],
    });
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.parts?.[0]).toMatchObject({ type: "audio", voice: true, durationSeconds: 3.2 });
    expect(sink.bytesOf(msg.parts?.[0])?.equals(ogg)).toBe(true);
  });

  it("refuses a forged attachment URL on another host, a declared size over the cap, and a stalled download", async () => {
    const forged = {
      ...fake.attachment(randomBytes(10), "a.png", "image/png"),
      url: `${elsewhere.url}/a.png`,
    };
    const huge = { ...fake.attachment(randomBytes(10), "b.mp4", "video/mp4"), size: 500 * 1024 * 1024 };
    const stalled = fake.attachment(randomBytes(100), "c.bin", "application/octet-stream", {}, true);
    fake.message(fake.dmChannelOf(ada), ada, "three", { attachments: [forged, huge, stalled] });
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.parts?.map((p) => (p.type === "media_note" ? p.reason : p.type))).toEqual([
      "download_failed",
      "too_large",
      "download_failed",
    ]);
    expect(elsewhereHits).toBe(0);
    expect(fake.attachmentRequests.map((r) => r.path)).toEqual([expect.stringContaining("c.bin")]);
  });

  it("sends files as multipart files[n] with the text as content; a long text continues in messages", async () => {
    expect(adapter.capabilities.media).toEqual({ captionLimit: 2000, voiceNotes: false });
    const png = randomBytes(2500);
    const pdf = randomBytes(1500);
    const text = Array.from({ length: 500 }, (_, i) => `w${i}`).join(" ");
    const res = await adapter.send({
      accountId: "default",
      to: fake.textChannelId,
      text,
      format: "native",
      attachments: [
        outboundFile(png, { kind: "image", mimeType: "image/png", name: "chart.png" }),
        outboundFile(pdf, { kind: "file", mimeType: "application/pdf", name: "report.pdf" }),
      ],
    });
    const first = fake.sent[0];
    expect(first?.files?.map((f) => [f.field, f.filename, f.bytes.length])).toEqual([
      ["files[0]", "chart.png", 2500],
      ["files[1]", "report.pdf", 1500],
    ]);
    const caption = String(first?.body.content ?? "");
    expect(caption.length).toBeLessThanOrEqual(2000);
    const all = fake.sent.map((m) => String(m.body.content ?? "")).join(" ");
    expect(all.split(/\s+/)).toEqual(text.split(" "));
    expect(res.messageIds).toHaveLength(fake.sent.length);
  });

  it("sends files into a DM when `to` is the user", async () => {
    fake.dm(ada, "hello");
    await eventually(() => inbound[0], 300);
    await adapter.send({
      accountId: "default",
      to: ada.id,
      text: "for you",
      format: "plain",
      attachments: [outboundFile(randomBytes(10), { kind: "file", mimeType: "text/plain", name: "a.txt" })],
    });
    expect(fake.sentTo().at(-1)).toMatchObject({ to: ada.id, text: "for you" });
  });
});
