import { Readable } from "node:stream";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { MediaPart } from "../../src/channels/types.js";
import type { ConfigInput } from "../../src/config/index.js";
import { ensureSession } from "../../src/sessions/service.js";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { attachChannel, plainMemoryChannel, startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * `media.tts.auto` (API.md §8.2) against the loopback OpenAI fake: a reply goes out as text and as a
 * voice note made by `POST /audio/speech` (`response_format: "opus"`), stored in the media store;
 * "inbound" only for a turn whose user line held a voice note, "always" for every reply; a speech
 * failure keeps the text reply.
 */

const CHAT = "agent:main:memory:direct:u1";
let fake: OpenAIFake;
let t: TestApp | null = null;
let runs = 0;

beforeAll(async () => {
  fake = await startOpenAIFake();
  fake.setDefault(() => ({ text: "the weather is fine" }));
});
afterAll(async () => {
  await fake?.close();
});
afterEach(async () => {
  await t?.stop();
  t = null;
});

async function setUp(tts: Record<string, unknown>, providers: Record<string, unknown> = {}) {
  fake.requests.length = 0;
  const app = await startTestApp({
    models: {
      default: "fake/m",
      providers: { fake: { kind: "openai", baseUrl: fake.url, apiKey: "k", maxRetries: 0 }, ...providers },
    },
    media: {
      tts: { provider: "fake", model: "tts-test", voice: "nova", ...tts },
      understanding: { audio: { provider: "fake" } },
    },
  } as Partial<ConfigInput>);
  t = app;
  const channel = await attachChannel(
    app,
    plainMemoryChannel({ media: { captionLimit: 1000, voiceNotes: true } }),
  );
  await ensureSession(app.app.services, CHAT, { agentId: "main" });
  await app.app.services.store.sessions.patch(CHAT, {
    deliveryContext: { channel: "memory", to: "chat-1", accountId: "default" },
  });
  return { app, channel };
}

async function voicePart(app: TestApp): Promise<MediaPart> {
  const media = app.app.services.media;
  if (!media) throw new Error("no media store");
  const s = await media.put(Readable.from([Buffer.concat([Buffer.from("OggS\0\x02"), Buffer.alloc(40)])]), {
    maxBytes: 1 << 20,
    declaredType: "audio/ogg",
  });
  return { type: "audio", mediaId: s.mediaId, mimeType: s.mimeType, bytes: s.bytes, voice: true };
}

async function turn(app: TestApp, text: string, parts: MediaPart[] = []) {
  const run = await app.app.services.pipeline.submitTurn({
    sessionKey: CHAT,
    agentId: "main",
    text,
    deliver: true,
    origin: "operator",
    runId: `tts-run-${++runs}`,
    ...(parts.length ? { meta: { parts } } : {}),
  } as never);
  const rec = await app.app.services.pipeline.wait(run.runId, 10_000);
  expect(rec?.status).toBe("ok");
}

const speechRequests = () => fake.audioRequests().filter((r) => r.path.endsWith("/audio/speech"));

describe("media.tts.auto", () => {
  it('"inbound": a reply to a voice note is text and a voice note; a text message gets text only', async () => {
    const { app, channel } = await setUp({ auto: "inbound" });
    await turn(app, "what's the weather?");
    expect(channel.sent.map((m) => m.text)).toEqual(["the weather is fine"]);
    expect(speechRequests()).toHaveLength(0);

    await turn(app, "", [await voicePart(app)]);
    const voice = await eventually(() => channel.sent.find((m) => m.attachments?.length));
    expect(channel.sent.filter((m) => m.text === "the weather is fine")).toHaveLength(2);
    const a = voice.attachments?.[0];
    expect(a).toMatchObject({ kind: "audio", voice: true });
    expect(a?.mediaId).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await app.app.services.media?.stat(a?.mediaId ?? "")).not.toBeNull();
    const bytes = await a?.read();
    expect(bytes?.subarray(0, 4).toString("latin1")).toBe("OggS");
    expect(bytes?.toString("latin1")).toContain("the weather is fine");
    const [req] = speechRequests();
    expect(req?.body).toMatchObject({
      model: "tts-test",
      voice: "nova",
      input: "the weather is fine",
      response_format: "opus",
    });
    expect(req?.headers.authorization).toBe("Bearer k");
  });

  it('"always": every reply also goes as a voice note; "off" never', async () => {
    const { app, channel } = await setUp({ auto: "always" });
    await turn(app, "hello");
    await eventually(() => channel.sent.find((m) => m.attachments?.[0]?.voice));
    expect(channel.sent.map((m) => [m.text, m.attachments?.length ?? 0])).toEqual([
      ["the weather is fine", 0],
      ["", 1],
    ]);
    await t?.stop();
    const off = await setUp({ auto: "off" });
    await turn(off.app, "", [await voicePart(off.app)]);
    expect(off.channel.sent.map((m) => [m.text, m.attachments?.length ?? 0])).toEqual([
      ["the weather is fine", 0],
    ]);
    expect(speechRequests()).toHaveLength(0);
  });

  it("a speech failure keeps the text reply (no voice note, the run ok)", async () => {
    const { app, channel } = await setUp(
      { auto: "always", provider: "down" },
      { down: { kind: "openai", baseUrl: "http://127.0.0.1:9/v1", apiKey: "k", maxRetries: 0 } },
    );
    await turn(app, "hello");
    expect(channel.sent.map((m) => [m.text, m.attachments?.length ?? 0])).toEqual([
      ["the weather is fine", 0],
    ]);
  });
});
