import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTelegramChannel, type TelegramChannel } from "../../channels/telegram/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { silentLogger } from "../../src/log.js";
import { outboundFile, TestMediaSink } from "../fakes/media-sink.js";
import { FakeTelegram, type FakeUser, TELEGRAM_CAPTION_LIMIT } from "../fakes/telegram.js";
import { eventually } from "../helpers.js";

const ADA: FakeUser = { id: 4242, is_bot: false, first_name: "Ada", username: "ada" };
const DM = { id: 4242, type: "private" as const };

describe("telegram media (grammY against the loopback Bot API)", () => {
  let fake: FakeTelegram;
  let adapter: TelegramChannel;
  let sink: TestMediaSink;
  let inbound: InboundMessage[];
  const collect = async (m: InboundMessage): Promise<void> => {
    inbound.push(m);
  };

  const start = async (extra: Record<string, unknown> = {}, sinkTimeoutMs = 2000) => {
    sink = new TestMediaSink(sinkTimeoutMs);
    adapter = createTelegramChannel(
      {
        accountId: "default",
        token: fake.token,
        apiRoot: fake.apiRoot,
        pollingTimeoutSeconds: 1,
        albumQuietMs: 150,
        ...extra,
      },
      { logger: silentLogger() },
    );
    await adapter.start(collect, { media: sink });
  };

  beforeEach(async () => {
    inbound = [];
    fake = await FakeTelegram.start();
  });

  afterEach(async () => {
    await adapter?.stop();
    await fake.close();
    sink?.cleanup();
  });

  it("a photo with a caption reaches the handler as its text plus the largest size, downloaded through getFile", async () => {
    await start();
    const small = fake.addFile(randomBytes(900), "photos/file_1.jpg");
    const bigBytes = randomBytes(120_000);
    const big = fake.addFile(bigBytes, "photos/file_2.jpg");
    fake.pushMessage(DM, ADA, {
      caption: "what is this",
      photo: [
        { file_id: small, file_unique_id: "s", width: 90, height: 60, file_size: 900 },
        { file_id: big, file_unique_id: "b", width: 1280, height: 853, file_size: bigBytes.length },
      ],
    });
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.text).toBe("what is this");
    expect(msg.parts).toHaveLength(1);
    expect(msg.parts?.[0]).toMatchObject({ type: "image", mimeType: "image/jpeg", bytes: bigBytes.length });
    expect(sink.bytesOf(msg.parts?.[0])?.equals(bigBytes)).toBe(true);
    // Only the largest size was fetched, with the bot's token, from the configured API root.
    expect(fake.calls.filter((c) => c.method === "getFile").map((c) => c.payload.file_id)).toEqual([big]);
    expect(fake.fileRequests).toEqual([{ path: "photos/file_2.jpg", tokenOk: true }]);
    expect(sink.calls[0]?.maxBytes).toBe(20 * 1024 * 1024);
  });

  it("takes voice (voice: true), audio, video, video notes, documents and stickers with their declared types", async () => {
    await start();
    const files = Array.from({ length: 6 }, (_, i) => randomBytes(1000 + i));
    const ids = files.map((b, i) => fake.addFile(b, `f/${i}`));
    const sends: Array<Record<string, unknown>> = [
      {
        voice: {
          file_id: ids[0],
          file_unique_id: "v",
          duration: 12,
          mime_type: "audio/ogg",
          file_size: 1000,
        },
      },
      {
        audio: {
          file_id: ids[1],
          file_unique_id: "a",
          duration: 200,
          file_name: "song.mp3",
          mime_type: "audio/mpeg",
        },
      },
      {
        video: {
          file_id: ids[2],
          file_unique_id: "vi",
          width: 640,
          height: 360,
          duration: 5,
          mime_type: "video/mp4",
        },
      },
      { video_note: { file_id: ids[3], file_unique_id: "vn", length: 240, duration: 4 } },
      {
        document: {
          file_id: ids[4],
          file_unique_id: "d",
          file_name: "report.pdf",
          mime_type: "application/pdf",
        },
      },
      {
        sticker: {
          file_id: ids[5],
          file_unique_id: "st",
          type: "regular",
          width: 512,
          height: 512,
          is_animated: false,
          is_video: false,
          emoji: "😀",
        },
      },
    ];
    for (const s of sends) fake.pushMessage(DM, ADA, s);
    await eventually(() => inbound.length === 6, 300);
    const parts = inbound.map((m) => m.parts?.[0]);
    expect(parts[0]).toMatchObject({
      type: "audio",
      voice: true,
      durationSeconds: 12,
      mimeType: "audio/ogg",
    });
    expect(parts[1]).toMatchObject({ type: "audio", voice: false, durationSeconds: 200 });
    expect(parts[2]).toMatchObject({ type: "video", mimeType: "video/mp4", durationSeconds: 5 });
    expect(parts[3]).toMatchObject({ type: "video", mimeType: "video/mp4", durationSeconds: 4 });
    expect(parts[4]).toMatchObject({ type: "file", name: "report.pdf", mimeType: "application/pdf" });
    expect(parts[5]).toMatchObject({ type: "image", mimeType: "image/webp" });
    for (const [i, p] of parts.entries()) {
      if (p?.type !== "media_note") expect(sink.bytesOf(p)?.equals(files[i] as Buffer)).toBe(true);
    }
    // An empty caption is still a message: the model is told something was sent.
    expect(inbound[0]?.text).toBe("");
  });

  it("an album (one media_group_id) is one message, one turn, with every item in order", async () => {
    await start();
    const a = randomBytes(2000);
    const b = randomBytes(3000);
    const c = randomBytes(4000);
    const photo = (id: string, n: number) => [
      { file_id: id, file_unique_id: id, width: 10, height: 10, file_size: n },
    ];
    fake.pushMessage(DM, ADA, { media_group_id: "alb1", photo: photo(fake.addFile(a, "p/a"), a.length) });
    fake.pushMessage(DM, ADA, {
      media_group_id: "alb1",
      caption: "our trip",
      photo: photo(fake.addFile(b, "p/b"), b.length),
    });
    fake.pushMessage(DM, ADA, {
      media_group_id: "alb1",
      video: { file_id: fake.addFile(c, "p/c"), file_unique_id: "c", width: 1, height: 1, duration: 1 },
    });
    const msg = await eventually(() => inbound[0], 300);
    // Give a stray second turn a chance to show up.
    await new Promise((r) => setTimeout(r, 300));
    expect(inbound).toHaveLength(1);
    expect(msg.text).toBe("our trip");
    expect(msg.parts?.map((p) => p.type)).toEqual(["image", "image", "video"]);
    expect(msg.parts?.map((p) => sink.bytesOf(p)?.length)).toEqual([2000, 3000, 4000]);
    expect(msg.media).toHaveLength(3);
  });

  it("a declared size over mediaMaxMb fetches nothing and becomes a too_large note; the text still arrives", async () => {
    await start({ mediaMaxMb: 0.5 });
    const id = fake.addFile(randomBytes(10), "d/huge.bin");
    fake.pushMessage(DM, ADA, {
      caption: "big one",
      document: { file_id: id, file_unique_id: "h", file_name: "huge.bin", file_size: 2_000_000_000 },
    });
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.text).toBe("big one");
    expect(msg.parts).toEqual([
      { type: "media_note", reason: "too_large", name: "huge.bin", bytes: 2_000_000_000 },
    ]);
    expect(fake.calls.some((c) => c.method === "getFile")).toBe(false);
    expect(fake.fileRequests).toEqual([]);
  });

  it("a stalled download is aborted by the sink's signal and becomes a note; the message is not held up", async () => {
    await start({}, 300);
    const id = fake.addFile(randomBytes(5000), "d/stall.bin", true);
    const t0 = Date.now();
    fake.pushMessage(DM, ADA, { document: { file_id: id, file_unique_id: "x", file_name: "stall.bin" } });
    const msg = await eventually(() => inbound[0], 300);
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(msg.parts?.[0]).toMatchObject({
      type: "media_note",
      reason: "download_failed",
      name: "stall.bin",
    });
  });

  it("hands a file name with path tricks and bidi characters to the sink as is, never using it as a path", async () => {
    await start();
    const name = "../../etc/\u202Egnp.exe";
    const bytes = randomBytes(100);
    const id = fake.addFile(bytes, "documents/file_9.bin");
    fake.pushMessage(DM, ADA, { document: { file_id: id, file_unique_id: "n", file_name: name } });
    const msg = await eventually(() => inbound[0], 300);
    expect(sink.calls[0]?.attachments[0]?.name).toBe(name);
    expect(sink.bytesOf(msg.parts?.[0])?.equals(bytes)).toBe(true);
    // The adapter only ever fetched the server's own file_path.
    expect(fake.fileRequests.map((r) => r.path)).toEqual(["documents/file_9.bin"]);
  });

  it("without a media sink, messages still arrive with their media summary and nothing is downloaded", async () => {
    adapter = createTelegramChannel(
      { accountId: "default", token: fake.token, apiRoot: fake.apiRoot, pollingTimeoutSeconds: 1 },
      { logger: silentLogger() },
    );
    await adapter.start(collect);
    const id = fake.addFile(randomBytes(10), "v/1.ogg");
    fake.pushMessage(DM, ADA, { voice: { file_id: id, file_unique_id: "v", duration: 3 } });
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.parts).toBeUndefined();
    expect(msg.media).toEqual([{ kind: "audio" }]);
    expect(fake.fileRequests).toEqual([]);
  });

  describe("out", () => {
    it("declares its caption limit and voice notes", async () => {
      await start();
      expect(adapter.capabilities.media).toEqual({ captionLimit: 1024, voiceNotes: true });
    });

    it("sends an image as a photo with the text as caption, the bytes streamed from the attachment", async () => {
      await start();
      const png = randomBytes(3000);
      const res = await adapter.send({
        accountId: "default",
        to: "4242",
        text: "<b>here</b> it is",
        format: "native",
        attachments: [outboundFile(png, { kind: "image", mimeType: "image/png", name: "chart.png" })],
      });
      expect(res.messageIds).toHaveLength(1);
      const up = fake.uploads[0];
      expect(up?.method).toBe("sendPhoto");
      expect(up?.fields.caption).toBe("<b>here</b> it is");
      expect(up?.fields.parse_mode).toBe("HTML");
      expect(up?.files).toHaveLength(1);
      expect(up?.files[0]?.filename).toBe("chart.png");
      expect(up?.files[0]?.bytes.equals(png)).toBe(true);
    });

    it("voice → sendVoice, other audio → sendAudio, video → sendVideo, files → sendDocument", async () => {
      await start();
      const ogg = randomBytes(500);
      await adapter.send({
        accountId: "default",
        to: "4242",
        text: "",
        format: "plain",
        attachments: [
          outboundFile(ogg, { kind: "audio", mimeType: "audio/ogg", name: "reply.ogg", voice: true }),
          outboundFile(randomBytes(10), { kind: "audio", mimeType: "audio/wav", name: "a.wav", voice: true }),
          outboundFile(randomBytes(10), { kind: "video", mimeType: "video/mp4", name: "v.mp4" }),
          outboundFile(randomBytes(10), { kind: "file", mimeType: "application/pdf", name: "r.pdf" }),
          outboundFile(randomBytes(10), { kind: "image", mimeType: "image/svg+xml", name: "x.svg" }),
        ],
      });
      expect(fake.uploads.map((u) => u.method)).toEqual([
        "sendVoice",
        "sendAudio",
        "sendVideo",
        "sendDocument",
        "sendDocument",
      ]);
      expect(fake.uploads[0]?.files[0]?.bytes.equals(ogg)).toBe(true);
      expect(fake.uploads[0]?.fields.caption).toBeUndefined();
    });

    it("a text past the caption limit is split: the caption fits, the rest follows as messages, nothing lost", async () => {
      await start();
      const words = Array.from({ length: 400 }, (_, i) => `word${i}`).join(" ");
      await adapter.send({
        accountId: "default",
        to: "4242",
        text: words,
        format: "plain",
        attachments: [outboundFile(randomBytes(50), { kind: "file", mimeType: "text/plain", name: "n.txt" })],
      });
      const caption = fake.uploads[0]?.fields.caption ?? "";
      expect(caption.length).toBeGreaterThan(0);
      expect(caption.length).toBeLessThanOrEqual(TELEGRAM_CAPTION_LIMIT);
      const all = [caption, ...fake.sentMessages().map((m) => m.text)].join(" ");
      expect(all.split(/\s+/)).toEqual(words.split(" "));
    });
  });
});
