import JSZip from "jszip";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contentText, type OpenAIFake, oggOpus, startOpenAIFake } from "../fakes/openai.js";
import { postMedia, startTestApp, type TestApp } from "../harness.js";

/**
 * Media understanding at prompt build time (API.md §8.1), against the loopback OpenAI fake:
 * images as image_url data URLs (resized; kept from vision: false models), voice notes
 * transcribed through /audio/transcriptions, documents extracted; failures as notes, the turn runs.
 */

let fake: OpenAIFake;
let t: TestApp;
let seq = 0;

beforeAll(async () => {
  fake = await startOpenAIFake();
  t = await startTestApp(
    {
      models: {
        default: "fake/fake-model",
        providers: {
          fake: {
            kind: "openai",
            baseUrl: fake.url,
            maxRetries: 0,
            models: { blind: { vision: false } },
          },
        },
      },
      media: {
        understanding: {
          image: { maxSide: 256 },
          audio: { provider: "fake", model: "whisper-test", language: "en" },
          documents: { maxChars: 200 },
        },
      },
    },
    { listen: true },
  );
});
afterAll(async () => {
  await t?.stop();
  await fake?.close();
});

async function upload(bytes: Buffer, name: string, type = "application/octet-stream") {
  const r = await postMedia(t, bytes, name, type);
  expect(r.status).toBe(200);
  return (await r.json()) as { mediaId: string; mimeType: string; bytes: number };
}

/** Sends through the router as a web chat visitor would; returns the last chat request's user message. */
async function send(text: string, parts: unknown[]) {
  const r = await t.app.router.handle({
    channel: "webchat",
    accountId: "default",
    chatType: "direct",
    peerId: `v${++seq}`,
    senderId: `v${seq}`,
    text,
    messageId: `mu-${seq}`,
    wasMentioned: false,
    replyToBot: false,
    media: [],
    parts: parts as never,
  });
  const run = await t.app.services.pipeline.wait(r.runId as string, 15_000);
  expect(run?.status).toBe("ok");
  const req = fake.chatRequests().at(-1);
  const user = req?.body.messages?.filter((m) => m.role === "user").at(-1);
  const hist = await t.rpc("sessions.history", { sessionKey: r.sessionKey as string });
  const line = (hist.result.messages as Array<{ role: string; content: unknown }>)
    .filter((m) => m.role === "user")
    .at(-1);
  return { user, line, model: req?.body.model };
}

describe("media understanding", () => {
  it("an image reaches the model as an image_url data URL, resized to maxSide", async () => {
    const big = await sharp({ create: { width: 1200, height: 600, channels: 3, background: "#3366cc" } })
      .png()
      .toBuffer();
    const m = await upload(big, "wide.png", "image/png");
    const { user, line } = await send("what is this", [{ type: "image", ...m, name: "wide.png" }]);
    const content = user?.content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    expect(content[0]).toMatchObject({ type: "text" });
    expect(content[0]?.text).toContain("what is this");
    const url = content.find((c) => c.type === "image_url")?.image_url?.url ?? "";
    expect(url).toMatch(/^data:image\/jpeg;base64,/);
    const sent = await sharp(Buffer.from(url.split(",")[1] ?? "", "base64")).metadata();
    expect([sent.width, sent.height]).toEqual([256, 128]);
    // The transcript holds the id, never the bytes.
    expect(JSON.stringify(line)).not.toContain(url.slice(30, 60));
  });

  it("a model marked vision: false gets a note instead of the picture", async () => {
    const png = await sharp({ create: { width: 10, height: 10, channels: 3, background: "#000" } })
      .png()
      .toBuffer();
    const m = await upload(png, "tiny.png", "image/png");
    await t.rpc("chat.send", { sessionKey: "agent:main:blind", message: "hi", timeoutSeconds: 10 });
    const patched = await t.rpc("sessions.patch", {
      sessionKey: "agent:main:blind",
      patch: { model: "fake/blind" },
    });
    expect(patched.ok).toBe(true);
    const sent = await t.rpc("chat.send", {
      sessionKey: "agent:main:blind",
      message: "see?",
      attachments: [{ mediaId: m.mediaId }],
      timeoutSeconds: 10,
    });
    expect(sent.result.status).toBe("ok");
    const req = fake.chatRequests().at(-1);
    expect(req?.body.model).toBe("blind");
    const user = req?.body.messages?.filter((x) => x.role === "user").at(-1);
    expect(typeof user?.content).toBe("string");
    expect(user?.content).toMatch(/not shown: this model does not take images/);
  });

  it("a voice note is transcribed (multipart file/model/language) and the model sees [voice note 0:12] <transcript>", async () => {
    const ogg = oggOpus(Buffer.alloc(100, 1));
    const m = await upload(ogg, "voice.ogg", "audio/ogg");
    expect(m.mimeType).toMatch(/^audio\//);
    fake.setTranscription("remind me to buy milk");
    const { user, line } = await send("", [{ type: "audio", ...m, voice: true, durationSeconds: 12 }]);
    expect(contentText(user?.content)).toContain("[voice note 0:12] remind me to buy milk");
    const tr = fake.audioRequests().at(-1);
    expect(tr?.body).toMatchObject({ model: "whisper-test", language: "en" });
    expect((tr?.body as { file?: { bytes: number } } | undefined)?.file?.bytes).toBe(ogg.length);
    expect((line?.content as unknown[] | undefined)?.[1]).toMatchObject({
      type: "audio",
      transcript: "remind me to buy milk",
    });
  });

  it("a failed transcription is a media_note and a line the model sees; the turn still runs", async () => {
    const ogg = oggOpus(Buffer.alloc(100, 2));
    const m = await upload(ogg, "voice2.ogg", "audio/ogg");
    fake.setTranscription(() => ({ status: 500, text: "" }));
    const { user, line } = await send("listen", [{ type: "audio", ...m, voice: true }]);
    expect(contentText(user?.content)).toMatch(/could not be transcribed/);
    expect(line?.content).toContainEqual(
      expect.objectContaining({ type: "media_note", reason: "transcription_failed" }),
    );
    fake.setTranscription("ok");
  });

  it("documents are extracted (DOCX, text) capped at maxChars with the cut said; a corrupt PDF and a zip bomb are notes", async () => {
    const zip = new JSZip();
    zip.file(
      "[Content_Types].xml",
      '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    );
    zip.file(
      "_rels/.rels",
      '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    );
    zip.file(
      "word/document.xml",
      '<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Quarterly report: revenue up</w:t></w:r></w:p></w:body></w:document>',
    );
    const docx = await zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
    const d = await upload(docx, "report.docx");
    const text = await upload(Buffer.from(`${"x".repeat(300)}\n`), "long.txt", "text/plain");
    const pdf = await upload(Buffer.from("%PDF-1.7\n%garbage that is not a pdf body\n"), "broken.pdf");
    const bomb = new JSZip();
    bomb.file("word/document.xml", Buffer.alloc(70 * 1024 * 1024));
    const bombBuf = await bomb.generateAsync({
      type: "nodebuffer",
      compression: "DEFLATE",
      compressionOptions: { level: 1 },
    });
    const b = await upload(bombBuf, "bomb.docx");
    const { user, line } = await send("read these", [
      { type: "file", ...d, name: "report.docx" },
      { type: "file", ...text, name: "long.txt" },
      { type: "file", ...pdf, name: "broken.pdf" },
      { type: "file", ...b, name: "bomb.docx" },
    ]);
    const seen = contentText(user?.content);
    expect(seen).toContain("[file report.docx] Quarterly report: revenue up");
    expect(seen).toMatch(/\[file long\.txt\] x{200}\n\[… cut at 200 of 300 characters\]/);
    const parts = line?.content as Array<{
      type: string;
      reason?: string;
      name?: string;
      extracted?: unknown;
    }>;
    expect(parts.find((p) => p.name === "long.txt" && p.type === "file")?.extracted).toEqual({
      chars: 300,
      truncated: true,
    });
    expect(parts.filter((p) => p.type === "media_note").map((p) => [p.name, p.reason])).toEqual([
      ["broken.pdf", "extraction_failed"],
      ["bomb.docx", "extraction_failed"],
    ]);
    expect(seen).toMatch(/broken\.pdf.*could not be read/);
  });
});
