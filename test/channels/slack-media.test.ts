import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createSlackChannel, type SlackChannel } from "../../channels/slack/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { silentLogger } from "../../src/log.js";
import { type LoopbackServer, loopbackServer } from "../fakes/http.js";
import { outboundFile, TestMediaSink } from "../fakes/media-sink.js";
import { FakeSlack, postSignedEvent } from "../fakes/slack.js";
import { eventually } from "../helpers.js";

const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW_S = 1_750_000_000;

describe("slack media (Bolt and the WebClient against the loopback Slack)", () => {
  let fake: FakeSlack;
  let adapter: SlackChannel;
  let sink: TestMediaSink;
  let inbound: InboundMessage[];
  let elsewhere: LoopbackServer;
  let elsewhereHits: Array<string | undefined>;

  beforeEach(async () => {
    inbound = [];
    elsewhereHits = [];
    fake = await FakeSlack.start();
    elsewhere = await loopbackServer((req, res) => {
      elsewhereHits.push(req.headers.authorization);
      res.end("stolen");
    });
    sink = new TestMediaSink(300);
    adapter = createSlackChannel(
      {
        accountId: "default",
        botToken: fake.botToken,
        apiUrl: fake.apiUrl,
        mode: "http",
        signingSecret: SECRET,
      },
      { logger: silentLogger(), now: () => NOW_S * 1000 },
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

  const share = async (files: Array<Record<string, unknown>>, text = "") => {
    const event = {
      type: "message",
      subtype: "file_share",
      channel: "D0DM1",
      channel_type: "im",
      user: "U0ADA",
      text,
      ts: fake.nextTs(),
      files,
    };
    const res = await postSignedEvent(adapter, SECRET, fake.envelope(event), { timestampS: NOW_S });
    expect(res.status).toBe(200);
  };

  it("a multi-file message is one message; each file fetched with the bot token from url_private_download", async () => {
    const png = randomBytes(4000);
    const pdf = randomBytes(9000);
    await share(
      [fake.addFile(png, "chart.png", "image/png"), fake.addFile(pdf, "report.pdf", "application/pdf")],
      "what do you make of these",
    );
    const msg = await eventually(() => inbound[0], 300);
    expect(inbound).toHaveLength(1);
    expect(msg.text).toBe("what do you make of these");
    expect(msg.parts?.map((p) => p.type)).toEqual(["image", "file"]);
    expect(sink.bytesOf(msg.parts?.[0])?.equals(png)).toBe(true);
    expect(sink.bytesOf(msg.parts?.[1])?.equals(pdf)).toBe(true);
    expect(msg.parts?.[1]).toMatchObject({ name: "report.pdf", mimeType: "application/pdf" });
    expect(fake.fileRequests.map((r) => r.token)).toEqual([fake.botToken, fake.botToken]);
    expect(fake.fileRequests.every((r) => r.path.includes("?download=1"))).toBe(true);
  });

  it("a forged file URL on another host is refused before any request: the token never leaves", async () => {
    const forged = {
      ...fake.addFile(randomBytes(10), "x.png", "image/png"),
      url_private_download: `${elsewhere.url}/files-pri/T-F9/x.png`,
    };
    await share([forged], "look");
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.parts).toEqual([
      { type: "media_note", reason: "download_failed", name: "x.png", mimeType: "image/png", bytes: 10 },
    ]);
    expect(elsewhereHits).toEqual([]);
    expect(sink.failures[0]).toMatch(/not the platform's/);
  });

  it("a declared size over mediaMaxMb is not fetched; a stalled download is cut by the sink", async () => {
    const huge = { ...fake.addFile(randomBytes(10), "huge.mov", "video/quicktime"), size: 900 * 1024 * 1024 };
    const stalled = fake.addFile(randomBytes(4000), "slow.bin", "application/octet-stream", true);
    await share([huge, stalled]);
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.parts?.map((p) => p.type === "media_note" && p.reason)).toEqual([
      "too_large",
      "download_failed",
    ]);
    expect(fake.fileRequests.map((r) => r.path)).toEqual([expect.stringContaining("slow.bin")]);
  });

  it("a file object without URLs (Slack Connect) is completed with files.info", async () => {
    const bytes = randomBytes(500);
    const full = fake.addFile(bytes, "clip.m4a", "audio/mp4");
    await share([{ id: full.id, file_access: "check_file_info" }]);
    const msg = await eventually(() => inbound[0], 300);
    expect(fake.calls.some((c) => c.method === "files.info" && c.args.file === full.id)).toBe(true);
    expect(sink.bytesOf(msg.parts?.[0])?.equals(bytes)).toBe(true);
  });

  it("sends files with files.uploadV2: bytes uploaded, the text as initial_comment, into the thread", async () => {
    expect(adapter.capabilities.media).toEqual({ captionLimit: 4000, voiceNotes: false });
    const png = randomBytes(3000);
    const ogg = randomBytes(700);
    const res = await adapter.send({
      accountId: "default",
      to: "C0GEN",
      threadId: "1700000000.000001",
      text: "two files",
      format: "plain",
      attachments: [
        outboundFile(png, { kind: "image", mimeType: "image/png", name: "out.png" }),
        outboundFile(ogg, { kind: "audio", mimeType: "audio/ogg", name: "voice.ogg", voice: true }),
      ],
    });
    expect(res.messageIds).toHaveLength(2);
    expect(fake.completed).toEqual([
      expect.objectContaining({
        channel_id: "C0GEN",
        initial_comment: "two files",
        thread_ts: "1700000000.000001",
      }),
    ]);
    const bytes = [...fake.uploaded.values()].map((u) => [u.filename, u.bytes.length]);
    expect(bytes).toEqual([
      ["out.png", 3000],
      ["voice.ogg", 700],
    ]);
  });
});
