import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contentText, type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { HAS_CHROMIUM, launchChromium, openWebchat } from "./web.js";

/**
 * The web chat's files (API.md §8.1): uploaded with POST /media, sent in the socket's message
 * frame as `attachments`, shown in the user line (an inline image whose bytes load through the
 * token-authenticated GET /media), and seen by the model as an image part. Over the upload cap:
 * a clear error line. Files come from the file button, a drop on the chat and a pasted image.
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

/**
 * Runs in the page: builds `files` (base64 bytes) into a DataTransfer and dispatches a real
 * `drop` (DragEvent, with dragenter/dragover first, as a browser does) on the chat log, or a
 * `paste` (ClipboardEvent with clipboardData) on the message box. Answers whether the page took
 * the event (preventDefault), so a page that ignores it fails here, not later.
 */
const DISPATCH = `(({ kind, files }) => {
  const dt = new DataTransfer();
  for (const f of files) {
    const bin = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
    dt.items.add(new File([bin], f.name, { type: f.type }));
  }
  if (kind === "drop") {
    const log = document.getElementById("log");
    for (const type of ["dragenter", "dragover"])
      log.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
    const dragging = document.body.classList.contains("dragging");
    const ev = new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true });
    log.dispatchEvent(ev);
    return { taken: ev.defaultPrevented, dragging };
  }
  const ev = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
  document.getElementById("text").dispatchEvent(ev);
  return { taken: ev.defaultPrevented, dragging: false };
})`;

type InPageFile = { name: string; type: string; bytes: Buffer };

async function dispatchFiles(
  page: Page,
  kind: "drop" | "paste",
  files: InPageFile[],
): Promise<{ taken: boolean; dragging: boolean }> {
  const arg = {
    kind,
    files: files.map((f) => ({ name: f.name, type: f.type, b64: f.bytes.toString("base64") })),
  };
  return page.evaluate(`${DISPATCH}(${JSON.stringify(arg)})`);
}

/** The newest model request's last user message whose text holds `needle`, as parts. */
async function modelUserParts(needle: string) {
  return eventually(
    () =>
      fake
        .chatRequests()
        .map((r) => r.body.messages?.filter((m) => m.role === "user").at(-1))
        .filter((m) => m && contentText(m.content).includes(needle))
        .map((m) => m?.content as Array<{ type: string; text?: string; image_url?: { url: string } }>)
        .at(-1),
    100,
    100,
  );
}

/** The natural width of the image in the newest user line (0 until its bytes load). */
const lastUserImageWidth = (page: Page) =>
  page
    .locator(".user")
    .last()
    .locator("img")
    .evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth);

describe.runIf(HAS_CHROMIUM)("web chat files by drag-and-drop and by paste, in Chromium", () => {
  let browser: Browser;
  let page: Page;
  beforeAll(async () => {
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(`${base}/#token=${t.token}`);
    await page.locator('[data-testid="conn"][data-state="connected"]').waitFor({ timeout: 10_000 });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("a PNG and a text file dropped on the chat are uploaded, sent, shown inline and reach the model", {
    timeout: 30_000,
  }, async () => {
    const png = await sharp({ create: { width: 30, height: 12, channels: 3, background: "#3366cc" } })
      .png()
      .toBuffer();
    const notes = Buffer.from("the drop carried these notes: blue square, 30 wide\n");
    const uploads = fake.requests.length;
    const got = await dispatchFiles(page, "drop", [
      { name: "dropped.png", type: "image/png", bytes: png },
      { name: "notes.txt", type: "text/plain", bytes: notes },
    ]);
    expect(got).toEqual({ taken: true, dragging: true });
    await expect
      .poll(async () => (await page.getByTestId("attachment").allTextContents()).sort()) // uploads race
      .toEqual([expect.stringContaining("dropped.png"), expect.stringContaining("notes.txt")]);
    expect(fake.requests.length).toBe(uploads); // uploading is not sending
    await page.getByLabel("Message").fill("look at the drop");
    await page.getByRole("button", { name: "Send" }).click();

    const parts = await modelUserParts("look at the drop");
    expect(parts.find((c) => c.type === "text")?.text).toContain("look at the drop");
    const url = parts.find((c) => c.type === "image_url")?.image_url?.url ?? "";
    expect(url).toMatch(/^data:image\/png;base64,/);
    const meta = await sharp(Buffer.from(url.split(",")[1] ?? "", "base64")).metadata();
    expect([meta.width, meta.height]).toEqual([30, 12]);
    expect(contentText(parts)).toContain("[file notes.txt] the drop carried these notes: blue square");

    await expect.poll(() => lastUserImageWidth(page), { timeout: 5000 }).toBe(30);
    expect(await page.locator(".user").last().locator("img").getAttribute("alt")).toContain("dropped.png");
    expect(await page.getByTestId("attachment").count()).toBe(0);
  });

  it("an image pasted into the message box is uploaded, sent, shown inline and reaches the model", {
    timeout: 30_000,
  }, async () => {
    const png = await sharp({ create: { width: 18, height: 40, channels: 3, background: "#33cc66" } })
      .png()
      .toBuffer();
    const got = await dispatchFiles(page, "paste", [{ name: "image.png", type: "image/png", bytes: png }]);
    expect(got.taken).toBe(true);
    await expect
      .poll(() => page.getByTestId("attachment").allTextContents())
      .toEqual([expect.stringContaining("image.png")]);
    // a paste of files leaves the typed text alone
    expect(await page.getByLabel("Message").inputValue()).toBe("");
    await page.getByLabel("Message").fill("and the pasted one");
    await page.getByRole("button", { name: "Send" }).click();

    const parts = await modelUserParts("and the pasted one");
    const url = parts.find((c) => c.type === "image_url")?.image_url?.url ?? "";
    expect(url).toMatch(/^data:image\/png;base64,/);
    const meta = await sharp(Buffer.from(url.split(",")[1] ?? "", "base64")).metadata();
    expect([meta.width, meta.height]).toEqual([18, 40]);
    await expect.poll(() => lastUserImageWidth(page), { timeout: 5000 }).toBe(18);

    // pasted text (no file) is left to the browser: nothing is uploaded
    const plain = await page.evaluate(`(() => {
      const dt = new DataTransfer(); dt.setData("text/plain", "just words");
      const ev = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
      document.getElementById("text").dispatchEvent(ev);
      return ev.defaultPrevented;
    })()`);
    expect(plain).toBe(false);
    expect(await page.getByTestId("attachment").count()).toBe(0);
  });
});
