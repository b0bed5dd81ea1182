import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { encryptedStream } from "@whiskeysockets/baileys";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createWhatsAppChannel, type WhatsAppChannel } from "../../channels/whatsapp/index.js";
import type { InboundMessage } from "../../src/channels/types.js";
import { silentLogger } from "../../src/log.js";
import { type LoopbackServer, loopbackServer } from "../fakes/http.js";
import { outboundFile, TestMediaSink } from "../fakes/media-sink.js";
import { FakeWhatsApp } from "../fakes/whatsapp.js";
import { eventually, tempDir } from "../helpers.js";

const ADA = "4917012345678";

describe("whatsapp media (Baileys' own download and decryption against a loopback CDN)", () => {
  let wa: FakeWhatsApp;
  let adapter: WhatsAppChannel;
  let sink: TestMediaSink;
  let cdn: LoopbackServer;
  let served: Map<string, Buffer | "gone">;
  let inbound: InboundMessage[];
  let cleanupDir: () => void;

  beforeEach(async () => {
    inbound = [];
    served = new Map();
    cdn = await loopbackServer((req, res) => {
      const body = served.get(req.url ?? "");
      if (!body || body === "gone") {
        res.writeHead(body === "gone" ? 410 : 404);
        return void res.end();
      }
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.end(body);
    });
    wa = new FakeWhatsApp();
    sink = new TestMediaSink(2000);
    const { dir, cleanup } = tempDir("sb-wa-media-");
    cleanupDir = cleanup;
    adapter = createWhatsAppChannel(
      { accountId: "default" },
      { logger: silentLogger(), stateDir: dir, socketFactory: wa.factory, printQr: () => undefined },
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
    await cdn.close();
    sink.cleanup();
    cleanupDir();
  });

  /** Encrypts with Baileys' own encryptedStream and serves it at `path` (no directPath: Baileys fetches `url`). */
  async function encrypted(plain: Buffer, type: "image" | "audio" | "document", path: string) {
    const enc = await encryptedStream(plain, type);
    served.set(path, readFileSync(enc.encFilePath));
    rmSync(enc.encFilePath, { force: true });
    return { url: `${cdn.url}${path}`, mediaKey: enc.mediaKey };
  }

  const dm = (message: Record<string, unknown>) => ({
    key: { remoteJid: `${ADA}@s.whatsapp.net`, fromMe: false, id: wa.nextId() },
    message,
    messageTimestamp: 1_750_000_000,
    pushName: "Ada",
  });

  it("a voice note (ptt) and a captioned photo are downloaded and decrypted byte for byte", async () => {
    const ogg = randomBytes(3000);
    const jpg = randomBytes(6000);
    const voice = await encrypted(ogg, "audio", "/v.enc");
    const photo = await encrypted(jpg, "image", "/p.enc");
    wa.current.upsert([
      dm({ audioMessage: { ...voice, mimetype: "audio/ogg; codecs=opus", ptt: true, seconds: 3 } }),
      dm({
        imageMessage: { ...photo, mimetype: "image/jpeg", caption: "what is this", fileLength: jpg.length },
      }),
    ]);
    await eventually(() => inbound.length === 2, 300);
    expect(inbound[0]?.parts?.[0]).toMatchObject({ type: "audio", voice: true, durationSeconds: 3 });
    expect(sink.bytesOf(inbound[0]?.parts?.[0])?.equals(ogg)).toBe(true);
    expect(inbound[1]?.text).toBe("what is this");
    expect(sink.bytesOf(inbound[1]?.parts?.[0])?.equals(jpg)).toBe(true);
  });

  it("expired media (410) is asked again from the phone once (updateMediaMessage), then downloaded", async () => {
    const pdf = randomBytes(2000);
    const fresh = await encrypted(pdf, "document", "/fresh.enc");
    served.set("/old.enc", "gone");
    wa.current.reuploadAnswer = (msg) => ({
      ...msg,
      message: { documentMessage: { ...msg.message.documentMessage, url: fresh.url } },
    });
    wa.current.upsert([
      dm({
        documentMessage: {
          url: `${cdn.url}/old.enc`,
          mediaKey: fresh.mediaKey,
          mimetype: "application/pdf",
          fileName: "../report\u202E.pdf",
        },
      }),
    ]);
    const msg = await eventually(() => inbound[0], 300);
    expect(wa.current.reuploads).toHaveLength(1);
    expect(msg.parts?.[0]).toMatchObject({ type: "file", name: "../report\u202E.pdf" });
    expect(sink.bytesOf(msg.parts?.[0])?.equals(pdf)).toBe(true);
  });

  it("a declared fileLength over mediaMaxMb fetches nothing", async () => {
    served.set("/big.enc", Buffer.alloc(1));
    wa.current.upsert([
      dm({
        videoMessage: {
          url: `${cdn.url}/big.enc`,
          mediaKey: randomBytes(32),
          mimetype: "video/mp4",
          fileLength: 900 * 1024 * 1024,
        },
      }),
    ]);
    const msg = await eventually(() => inbound[0], 300);
    expect(msg.parts).toEqual([
      { type: "media_note", reason: "too_large", mimeType: "video/mp4", bytes: 900 * 1024 * 1024 },
    ]);
    expect(sink.opened).toBe(0);
  });

  it("sends photos with caption, voice notes as ptt OGG/Opus and documents through sock.sendMessage", async () => {
    expect(adapter.capabilities.media).toEqual({ captionLimit: 1024, voiceNotes: true });
    const png = randomBytes(100);
    const ogg = randomBytes(50);
    const pdf = randomBytes(70);
    const res = await adapter.send({
      accountId: "default",
      to: `+${ADA}`,
      text: "here you go",
      format: "plain",
      attachments: [
        outboundFile(png, { kind: "image", mimeType: "image/png", name: "a.png" }),
        outboundFile(ogg, { kind: "audio", mimeType: "audio/ogg", name: "v.ogg", voice: true }),
        outboundFile(pdf, { kind: "file", mimeType: "application/pdf", name: "r.pdf" }),
      ],
    });
    expect(res.messageIds).toHaveLength(3);
    const sent = wa.current.contents.map((c) => c.content);
    expect(sent[0]).toMatchObject({ image: png, caption: "here you go", mimetype: "image/png" });
    expect(sent[1]).toMatchObject({ audio: ogg, ptt: true, mimetype: "audio/ogg; codecs=opus" });
    expect(sent[2]).toMatchObject({ document: pdf, fileName: "r.pdf", mimetype: "application/pdf" });
    expect(sent[2]).not.toHaveProperty("caption");
  });
});
