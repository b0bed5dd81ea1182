import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { postMedia, startTestApp, type TestApp } from "../harness.js";

/**
 * A picture whose file passed `media.store.retention` while its session went on (API.md §8.1: a
 * file that cannot be read is a note the model sees; the turn still runs). The picture's decision
 * was cached with the session; the next call must not fail on it.
 */

let oa: OpenAIFake;
let t: TestApp;

beforeAll(async () => {
  oa = await startOpenAIFake();
  t = await startTestApp(
    {
      models: {
        default: "oa/fake-model",
        providers: { oa: { kind: "openai", baseUrl: oa.url, maxRetries: 0 } },
      },
      media: { store: { retention: "2s" } },
    },
    { listen: true },
  );
});
afterAll(async () => {
  await t?.stop();
  await oa?.close();
});

let seq = 0;
async function say(text: string, parts: unknown[]): Promise<string | undefined> {
  const r = await t.app.router.handle({
    channel: "webchat",
    accountId: "default",
    chatType: "direct",
    peerId: "expiry",
    senderId: "expiry",
    text,
    messageId: `exp-${++seq}`,
    wasMentioned: false,
    replyToBot: false,
    media: [],
    parts: parts as never,
  });
  return (await t.app.services.pipeline.wait(r.runId as string, 15_000))?.status;
}

/** The user lines of the newest chat request, as JSON text, and how many image_url parts they hold. */
function lastUsers(): { text: string; pictures: number } {
  const users = (oa.chatRequests().at(-1)?.body?.messages ?? []).filter((m) => m.role === "user");
  const pictures = users.flatMap((m) =>
    Array.isArray(m.content)
      ? (m.content as Array<{ type: string }>).filter((c) => c.type === "image_url")
      : [],
  ).length;
  return { text: JSON.stringify(users), pictures };
}

describe("a picture past the store's retention", () => {
  it("is a note on the next call, and the turn runs", async () => {
    const png = await sharp({ create: { width: 16, height: 16, channels: 3, background: "#4a8" } })
      .png()
      .toBuffer();
    const r = await postMedia(t, png, "leaf.png", "image/png");
    const stored = (await r.json()) as { mediaId: string; mimeType: string; bytes: number };
    expect(await say("what is this", [{ type: "image", ...stored, name: "leaf.png" }])).toBe("ok");
    expect(lastUsers().pictures).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 2200));
    expect(await say("and now?", [])).toBe("ok");
    const { text, pictures } = lastUsers();
    expect(pictures).toBe(0);
    expect(text).toContain("[an image could not be read: the file is no longer stored]");
    expect(await say("still there?", [])).toBe("ok");
  });
});
