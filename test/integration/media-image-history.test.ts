import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mediaSchema } from "../../src/config/media.js";
import { type AnthropicFake, startAnthropicFake } from "../fakes/anthropic.js";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { postMedia, startTestApp, type TestApp } from "../harness.js";

/**
 * Earlier pictures are not sent again on every call (API.md §8.1,
 * `media.understanding.image.historyLimit`): the newest line's pictures and at most `historyLimit`
 * earlier ones reach the model as pictures; older ones as a one-line note with their name and id.
 * Checked on the real request bodies at the loopback OpenAI and Anthropic fakes.
 */

let oa: OpenAIFake;
let an: AnthropicFake;
let t: TestApp;

beforeAll(async () => {
  oa = await startOpenAIFake();
  an = await startAnthropicFake();
  t = await startTestApp(
    {
      models: {
        default: "oa/fake-model",
        providers: {
          oa: { kind: "openai", baseUrl: oa.url, maxRetries: 0 },
          an: { kind: "anthropic", baseUrl: an.url, apiKey: "sk-an-test-1234567890", maxRetries: 0 },
        },
      },
      // each peer its own session
      session: { dmScope: "per-peer" },
      media: { understanding: { image: { historyLimit: 2 } } },
    },
    { listen: true },
  );
});
afterAll(async () => {
  await t?.stop();
  await oa?.close();
  await an?.close();
});

async function upload(i: number) {
  const png = await sharp({
    create: { width: 8, height: 8, channels: 3, background: { r: (i * 20) % 256, g: 5, b: 9 } },
  })
    .png()
    .toBuffer();
  const r = await postMedia(t, png, `pic${i}.png`, "image/png");
  expect(r.status).toBe(200);
  return (await r.json()) as { mediaId: string; mimeType: string; bytes: number };
}

let seq = 0;

/** One web chat message from `peer` with `parts`, through the router; resolves when its turn ran. */
async function say(peer: string, text: string, parts: unknown[]): Promise<string> {
  const r = await t.app.router.handle({
    channel: "webchat",
    accountId: "default",
    chatType: "direct",
    peerId: peer,
    senderId: peer,
    text,
    messageId: `hist-${++seq}`,
    wasMentioned: false,
    replyToBot: false,
    media: [],
    parts: parts as never,
  });
  const run = await t.app.services.pipeline.wait(r.runId as string, 15_000);
  expect(run?.status).toBe("ok");
  return r.sessionKey as string;
}

/** Six turns from `peer`, one picture each (the last turn two); returns the ids in order. */
async function sixTurns(peer: string): Promise<string[]> {
  const ids: string[] = [];
  for (let turn = 0; turn < 6; turn++) {
    const batch = turn === 5 ? [turn * 2 + 40, turn * 2 + 41] : [turn];
    const parts = [];
    for (const [k, i] of batch.entries())
      parts.push({ type: "image", ...(await upload(i)), name: `pic${turn}-${k}.png` });
    ids.push(...parts.map((p) => p.mediaId));
    await say(peer, `picture ${turn}`, parts);
  }
  return ids;
}

describe("earlier pictures past historyLimit", () => {
  it("defaults to 4", () => {
    expect(mediaSchema.parse({}).understanding.image.historyLimit).toBe(4);
  });

  it("openai: the newest line's pictures and the 2 before them are image_url parts; older ones a note with their id", async () => {
    const ids = await sixTurns("hist-oa");
    const body = oa.chatRequests().at(-1)?.body;
    const users = (body?.messages ?? []).filter((m) => m.role === "user");
    const urls = users.flatMap((m) =>
      Array.isArray(m.content)
        ? (m.content as Array<{ type: string; image_url?: { url: string } }>).filter(
            (c) => c.type === "image_url",
          )
        : [],
    );
    // 7 pictures in the session: the newest line's 2, then the 2 before them
    expect(urls).toHaveLength(4);
    const text = JSON.stringify(users);
    for (const id of ids.slice(0, 3)) expect(text).toContain(`(${id}) not shown again`);
    for (const id of ids.slice(3)) expect(text).not.toContain(`(${id}) not shown again`);
    expect(text).toContain("[image pic0-0.png (");
    // the kept ones are the newest: their bytes are what was uploaded last
    const last = (
      await sharp(Buffer.from(urls.at(-1)!.image_url!.url.split(",")[1] ?? "", "base64"))
        .raw()
        .toBuffer()
    )[0];
    expect(last).toBe((51 * 20) % 256);
  });

  it("anthropic: the same, as image blocks", async () => {
    const sessionKey = await say("hist-an", "hi", []);
    const patched = await t.rpc("sessions.patch", { sessionKey, patch: { model: "an/claude-test" } });
    expect(patched.ok).toBe(true);
    const ids = await sixTurns("hist-an");
    const body = an.requests.at(-1)?.body;
    const blocks = (body?.messages ?? [])
      .filter((m) => m.role === "user" && Array.isArray(m.content))
      .flatMap((m) => m.content as Array<{ type: string; text?: string }>);
    expect(blocks.filter((b) => b.type === "image")).toHaveLength(4);
    const text = blocks.map((b) => b.text ?? "").join("\n");
    for (const id of ids.slice(0, 3)) expect(text).toContain(`(${id}) not shown again`);
    for (const id of ids.slice(3)) expect(text).not.toContain(`(${id}) not shown again`);
  });
});
