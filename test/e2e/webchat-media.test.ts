import { writeFileSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { HAS_CHROMIUM, launchChromium, openWebchat } from "./web.js";

/**
 * The web chat's files (API.md §8.1): uploaded with POST /media, sent in the socket's message
 * frame as `attachments`, shown in the user line (an inline image whose bytes load through the
 * token-authenticated GET /media), and seen by the model as an image part. Over the upload cap:
 * a clear error line.
 */

let fake: OpenAIFake;
let t: TestApp;
let base: string;

beforeAll(async () => {
  fake = await startOpenAIFake();
  t = await startTestApp(
    {
      models: {
        default: "fake/fake-model",
        providers: { fake: { kind: "openai", baseUrl: fake.url, maxRetries: 0 } },
      },
      // 20 KB: a small PNG passes, the "big" file below is refused with 413
      channels: { webchat: { mediaMaxMb: 0.02 } },
    },
    { listen: true },
  );
  base = `http://127.0.0.1:${t.app.address?.port}`;
});
afterAll(async () => {
  await t?.stop();
  await fake?.close();
});

describe("web chat attachments (protocol)", () => {
  it("an unknown mediaId is refused naming the field; an empty message without files too", async () => {
    const { ws, frames, ready } = openWebchat(base, t.token, "visitor-media1");
    await ready;
    ws.send(
      JSON.stringify({
        type: "message",
        id: "1",
        text: "x",
        attachments: [{ mediaId: `sha256:${"0".repeat(64)}` }],
      }),
    );
    ws.send(JSON.stringify({ type: "message", id: "2", text: " " }));
    ws.send(
      JSON.stringify({ type: "message", id: "3", text: "x", attachments: [{ mediaId: "../etc/passwd" }] }),
    );
    const errs = await eventually(
      () => {
        const e = frames.filter((f) => f.type === "error");
        return e.length >= 3 ? e : undefined;
      },
      200,
      20,
    );
    expect(errs.find((f) => f.id === "1")).toMatchObject({ code: "INVALID_PARAMS" });
    expect(errs.find((f) => f.id === "1")?.message).toContain("attachments[0].mediaId");
    expect(errs.find((f) => f.id === "2")?.message).toContain("text: required");
    // a malformed id fails the frame's schema (the frame's id is not read then)
    expect(errs.find((f) => f.id === undefined)).toMatchObject({ code: "INVALID_PARAMS" });
    expect(errs.find((f) => f.id === undefined)?.message).toContain("attachments");
    ws.close();
  });
});

describe.runIf(HAS_CHROMIUM)("web chat attachments in Chromium", () => {
  it("a person attaches a PNG, sends it, sees it inline; the model gets an image part; too large is a clear line", {
    timeout: 30_000,
  }, async () => {
    const png = await sharp({ create: { width: 24, height: 16, channels: 3, background: "#cc3366" } })
      .png()
      .toBuffer();
    const pngPath = join(t.dir, "dot.png");
    writeFileSync(pngPath, png);
    const bigPath = join(t.dir, "big.bin");
    writeFileSync(bigPath, Buffer.alloc(64 * 1024, 7));
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const mediaUrls: string[] = [];
      page.on("request", (r) => {
        if (r.url().includes("/media")) mediaUrls.push(r.url());
      });
      await page.goto(`${base}/#token=${t.token}`);
      await expect.poll(() => page.getByTestId("conn").getAttribute("data-state")).toBe("connected");
      const before = fake.chatRequests().length;

      await page.getByTestId("file").setInputFiles(pngPath);
      await expect
        .poll(() => page.getByTestId("attachment").allTextContents())
        .toEqual([expect.stringContaining("dot.png")]);
      await page.getByLabel("Message").fill("what is this");
      await page.getByRole("button", { name: "Send" }).click();

      // the user line shows the image, its bytes loaded from GET /media with the header token
      const img = page.locator(".user img");
      await expect
        .poll(() => img.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth), {
          timeout: 5000,
        })
        .toBe(24);
      expect(await img.getAttribute("alt")).toContain("dot.png");
      expect(mediaUrls.some((u) => u.includes("token="))).toBe(false);

      // the model request carried an image part
      await eventually(() => fake.chatRequests().length > before, 100, 100);
      const user = fake
        .chatRequests()
        .at(-1)
        ?.body.messages?.filter((m) => m.role === "user")
        .at(-1);
      const content = user?.content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
      expect(content.find((c) => c.type === "text")?.text).toContain("what is this");
      expect(content.find((c) => c.type === "image_url")?.image_url?.url).toMatch(/^data:image\//);
      await expect
        .poll(() => page.locator(".assistant").allTextContents(), { timeout: 10_000 })
        .toEqual(expect.arrayContaining([expect.stringContaining("what is this")]));

      // a reload shows the image again from the history
      await page.reload();
      await expect
        .poll(
          () =>
            page
              .locator(".user img")
              .evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth),
          {
            timeout: 5000,
          },
        )
        .toBe(24);

      // the dashboard's transcript shows the same line's image inline
      const dash = await browser.newPage();
      await dash.goto(`${base}/dashboard#token=${t.token}`);
      await dash.locator('.row[data-key="agent:main:main"]').click();
      await expect
        .poll(
          () =>
            dash
              .getByTestId("transcript")
              .locator('.msg[data-role="user"] img')
              .evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth),
          { timeout: 5000 },
        )
        .toBe(24);
      await dash.close();

      // over the upload cap: a clear error line, nothing pending
      await page.getByTestId("file").setInputFiles(bigPath);
      await expect
        .poll(() => page.getByTestId("upload-error").textContent())
        .toMatch(/Could not upload big\.bin: the file is too large/);
      expect(await page.getByTestId("attachment").count()).toBe(0);
    } finally {
      await browser.close();
    }
  });
});
