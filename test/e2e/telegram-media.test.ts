import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contentText, type OpenAIFake, oggOpus, startOpenAIFake } from "../fakes/openai.js";
import { FakeTelegram, type FakeUser } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * Media in, end to end (API.md §8.1): the real grammY adapter against the loopback Bot API, the
 * app's own media sink and fs media store, the openai provider against the loopback OpenAI fake
 * (which also transcribes). What reaches the model request, and what the transcript keeps.
 */

const ADA: FakeUser = { id: 5151, is_bot: false, first_name: "Ada" };
const DM = { id: ADA.id, type: "private" as const };

let tg: FakeTelegram;
let ai: OpenAIFake;
let t: TestApp;

beforeAll(async () => {
  tg = await FakeTelegram.start();
  ai = await startOpenAIFake();
  t = await startTestApp(
    {
      models: {
        default: "fake/fake-model",
        providers: { fake: { kind: "openai", baseUrl: ai.url, maxRetries: 0 } },
      },
      media: { understanding: { audio: { provider: "fake", model: "whisper-test" } } },
      channels: {
        telegram: {
          accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } },
          allowFrom: ["*"],
        },
      },
    },
    { listen: true },
  );
});

afterAll(async () => {
  await t?.stop();
  await tg?.close();
  await ai?.close();
});

type Part = { type: string; text?: string; image_url?: { url: string } };

/** The newest chat request whose last user message mentions `needle`, waiting for it. */
async function requestWith(needle: string) {
  return eventually(
    () =>
      ai
        .chatRequests()
        .map((r) => r.body.messages?.filter((m) => m.role === "user").at(-1))
        .find((m) => m && contentText(m.content).includes(needle)),
    500,
    20,
  );
}

/** The transcript's newest user line (sessions.history) holding `needle`. */
async function historyLine(needle: string) {
  const hist = await t.rpc("sessions.history", { sessionKey: "agent:main:main" });
  const line = (hist.result.messages as Array<{ role: string; content: unknown }>)
    .filter((m) => m.role === "user")
    .findLast((m) => JSON.stringify(m.content).includes(needle));
  expect(line).toBeDefined();
  return line;
}

describe("telegram media through the gateway to the model", () => {
  it('a photo captioned "what is this" reaches the model as the text and an image_url data URL; the transcript holds ids only', async () => {
    const jpeg = await sharp({ create: { width: 640, height: 480, channels: 3, background: "#cc3366" } })
      .jpeg()
      .toBuffer();
    const fileId = tg.addFile(jpeg, "photos/file_1.jpg");
    tg.pushMessage(DM, ADA, {
      caption: "what is this",
      photo: [{ file_id: fileId, file_unique_id: "p1", width: 640, height: 480, file_size: jpeg.length }],
    });
    const user = await requestWith("what is this");
    const content = user?.content as Part[];
    expect(Array.isArray(content)).toBe(true);
    expect(content.find((c) => c.type === "text")?.text).toContain("what is this");
    const url = content.find((c) => c.type === "image_url")?.image_url?.url ?? "";
    expect(url).toMatch(/^data:image\/jpeg;base64,[A-Za-z0-9+/]{100}/);
    const meta = await sharp(Buffer.from(url.split(",")[1] ?? "", "base64")).metadata();
    expect([meta.width, meta.height]).toEqual([640, 480]);
    expect(tg.fileRequests).toContainEqual({ path: "photos/file_1.jpg", tokenOk: true });

    const line = await historyLine("what is this");
    const stored = JSON.stringify(line);
    expect(stored).toMatch(/"mediaId":"sha256:[0-9a-f]{64}"/);
    expect(stored).not.toContain("base64");
    expect(stored).not.toContain(url.slice(40, 80));
    expect(stored).not.toContain(jpeg.toString("base64").slice(40, 80));
  });

  it("a voice note reaches the model as [voice note 0:07] <transcript>, transcribed through /audio/transcriptions", async () => {
    const ogg = oggOpus(Buffer.alloc(400, 3));
    ai.setTranscription("remind me to water the plants");
    const fileId = tg.addFile(ogg, "voice/file_2.oga");
    tg.pushMessage(DM, ADA, {
      voice: {
        file_id: fileId,
        file_unique_id: "v1",
        duration: 7,
        mime_type: "audio/ogg",
        file_size: ogg.length,
      },
    });
    const user = await requestWith("remind me to water");
    expect(contentText(user?.content)).toContain("[voice note 0:07] remind me to water the plants");
    const tr = ai.audioRequests().find((r) => r.path === "/v1/audio/transcriptions");
    expect(tr?.body).toMatchObject({ model: "whisper-test" });
    expect((tr?.body as { file?: { bytes: number } } | undefined)?.file?.bytes).toBe(ogg.length);

    const stored = JSON.stringify(await historyLine("remind me to water"));
    expect(stored).toContain('"type":"audio"');
    expect(stored).toMatch(/"mediaId":"sha256:[0-9a-f]{64}"/);
    expect(stored).not.toContain(ogg.toString("base64").slice(8, 48));
  });

  it("a text document reaches the model as [file name] <text>", async () => {
    const doc = Buffer.from("Shopping list: oat milk, lentils, basil.\n");
    const fileId = tg.addFile(doc, "documents/file_3.txt");
    tg.pushMessage(DM, ADA, {
      document: {
        file_id: fileId,
        file_unique_id: "d1",
        file_name: "list.txt",
        mime_type: "text/plain",
        file_size: doc.length,
      },
    });
    const user = await requestWith("Shopping list");
    expect(contentText(user?.content)).toContain("[file list.txt] Shopping list: oat milk, lentils, basil.");
    const stored = JSON.stringify(await historyLine("list.txt"));
    expect(stored).toMatch(/"type":"file"/);
    expect(stored).not.toContain("oat milk");
  });
});
