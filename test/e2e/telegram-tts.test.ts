import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import { type OpenAIFake, oggOpus, startOpenAIFake } from "../fakes/openai.js";
import { FakeTelegram, type FakeUser } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * `media.tts.auto` (API.md §8.2) end to end on Telegram: the real app and grammY adapter against
 * the loopback Bot API, the openai provider against the loopback OpenAI fake (chat, transcription
 * and `/audio/speech`). A reply to a voice note goes out as the text (`sendMessage`) and as a
 * native voice note (`sendVoice`, the OGG/Opus bytes the speech endpoint made); when speech fails
 * the text reply still goes out, and nothing else.
 */

const ADA: FakeUser = { id: 6262, is_bot: false, first_name: "Ada" };
const DM = { id: ADA.id, type: "private" as const };
const KEY = "sk-tts-test";
const REPLY = "it will be sunny at noon";

let ai: OpenAIFake;

beforeAll(async () => {
  // a wrong key is refused (401): the "broken speech" provider below uses one
  ai = await startOpenAIFake({ apiKey: KEY });
  ai.setDefault(() => ({ text: REPLY }));
  ai.setTranscription("what is the weather tomorrow");
});
afterAll(async () => {
  await ai?.close();
});

/** The app on a fresh Telegram fake, with `tts` speaking through `speechKey`. */
async function setUp(speechKey: string): Promise<{ tg: FakeTelegram; t: TestApp }> {
  const tg = await FakeTelegram.start();
  const t = await startTestApp(
    {
      models: {
        default: "fake/fake-model",
        providers: {
          fake: { kind: "openai", baseUrl: ai.url, apiKey: KEY, maxRetries: 0 },
          speech: { kind: "openai", baseUrl: ai.url, apiKey: speechKey, maxRetries: 0 },
        },
      },
      media: {
        understanding: { audio: { provider: "fake", model: "whisper-test" } },
        tts: { auto: "inbound", provider: "speech", model: "tts-test", voice: "nova" },
      },
      channels: {
        telegram: { accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } }, allowFrom: ["*"] },
      },
    } as Partial<ConfigInput>,
    { listen: true },
  );
  return { tg, t };
}

/** Ada sends a 4-second voice note. */
function pushVoiceNote(tg: FakeTelegram, name: string): void {
  const ogg = oggOpus(Buffer.alloc(300, 5));
  const fileId = tg.addFile(ogg, `voice/${name}.oga`);
  tg.pushMessage(DM, ADA, {
    voice: {
      file_id: fileId,
      file_unique_id: name,
      duration: 4,
      mime_type: "audio/ogg",
      file_size: ogg.length,
    },
  });
}

/** Resolves once `n` runs of Ada's DM session (the main session) have ended: speech comes after the text. */
async function runsEnded(t: TestApp, n: number): Promise<void> {
  await eventually(
    async () => {
      const runs = await t.app.services.store.runs.listBySession("agent:main:main", 20);
      return runs.length >= n && runs.every((r) => r.status === "ok");
    },
    500,
    40,
  );
}

const speechRequests = () => ai.audioRequests().filter((r) => r.path === "/v1/audio/speech");

describe("media.tts.auto on telegram", () => {
  it("a reply to a voice note goes out as text (sendMessage) and as a voice note (sendVoice, OGG/Opus)", {
    timeout: 30_000,
  }, async () => {
    const { tg, t } = await setUp(KEY);
    try {
      const before = speechRequests().length;
      pushVoiceNote(tg, "v1");
      const voice = await eventually(() => tg.uploads.find((u) => u.method === "sendVoice"), 500, 40);
      expect(voice.fields.chat_id).toBe(String(DM.id));
      const file = voice.files[0];
      // grammY sends the file as a part and names it in the `voice` field (attach://<part>)
      expect(voice.fields.voice).toBe(`attach://${file?.field}`);
      // the speech endpoint's bytes, unchanged: Ogg capture pattern, OpusHead, then the spoken text
      expect(file?.bytes.equals(oggOpus(Buffer.from(REPLY)))).toBe(true);
      expect(file?.bytes.subarray(28, 36).toString("latin1")).toBe("OpusHead");
      expect(tg.sentMessages().filter((m) => m.text === REPLY && m.chat_id === String(DM.id))).toHaveLength(
        1,
      );
      const speech = speechRequests().slice(before);
      expect(speech).toHaveLength(1);
      expect(speech[0]?.body).toMatchObject({
        model: "tts-test",
        voice: "nova",
        input: REPLY,
        response_format: "opus",
      });
      // nothing else went out as a file
      expect(tg.uploads.map((u) => u.method)).toEqual(["sendVoice"]);

      // a typed message is answered with text only ("inbound")
      tg.pushMessage(DM, ADA, { text: "and the day after?" });
      await eventually(() => tg.sentMessages().filter((m) => m.text === REPLY).length === 2, 500, 40);
      await runsEnded(t, 2);
      expect(speechRequests().slice(before)).toHaveLength(1);
      expect(tg.uploads).toHaveLength(1);
    } finally {
      await t.stop();
      await tg.close();
    }
  });

  it("when speech fails (the endpoint answers 401) the text reply still goes out, and no voice note", {
    timeout: 30_000,
  }, async () => {
    const { tg, t } = await setUp("sk-wrong");
    try {
      const before = speechRequests().length;
      pushVoiceNote(tg, "v2");
      await eventually(() => tg.sentMessages().find((m) => m.text === REPLY), 500, 40);
      await runsEnded(t, 1);
      // the speech request was made, and refused
      expect(
        speechRequests()
          .slice(before)
          .map((r) => r.headers.authorization),
      ).toEqual(["Bearer sk-wrong"]);
      expect(tg.uploads.filter((u) => u.method === "sendVoice")).toEqual([]);
      expect(tg.sentMessages().filter((m) => m.text === REPLY)).toHaveLength(1);
    } finally {
      await t.stop();
      await tg.close();
    }
  });
});
