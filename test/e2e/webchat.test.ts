import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { HAS_CHROMIUM, launchChromium, openWebchat } from "./web.js";

/** The built-in web chat: the WebSocket protocol, and a real headless Chromium typing into the page. */

let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await startTestApp({}, { listen: true });
  base = `http://127.0.0.1:${t.app.address?.port}`;
});
afterAll(async () => t?.stop());

const open = (visitor: string) => openWebchat(base, t.token, visitor);

describe("web chat protocol", () => {
  it("greets with the demo notice, acknowledges a message and pushes the reply", async () => {
    const c = open("visitor-0001");
    await c.ready;
    const hello = await eventually(() => c.frames.find((f) => f.type === "hello"), 200, 10);
    expect(hello.notice).toContain("scripted demo model");
    c.ws.send(JSON.stringify({ type: "message", id: "1", text: "hello web" }));
    await eventually(() => c.frames.find((f) => f.type === "ack" && f.id === "1"), 200, 10);
    const reply = await eventually(() => c.frames.find((f) => f.type === "message"), 500, 20);
    expect(reply.text).toContain("You said: hello web");
    const entry = await t.app.services.store.sessions.get("agent:main:main");
    expect(entry?.deliveryContext).toMatchObject({ channel: "webchat", to: "visitor-0001" });
    c.ws.close();
  });

  it("rejects bad frames and bad visitor ids with a clear error", async () => {
    const c = open("visitor-0002");
    await c.ready;
    c.ws.send("nope");
    c.ws.send(JSON.stringify({ type: "message", id: "", text: "" }));
    await eventually(() => c.frames.filter((f) => f.type === "error").length >= 2, 200, 10);
    expect(c.frames.filter((f) => f.type === "error").every((f) => f.code === "INVALID_PARAMS")).toBe(true);
    c.ws.close();
    const bad = open("x");
    const closed = await new Promise<number>((r) => bad.ws.once("close", (code) => r(code)));
    expect(closed).toBe(4400);
  });
});

describe.runIf(HAS_CHROMIUM)("web chat in Chromium", () => {
  it("a person types a message and sees the reply and the demo notice", { timeout: 60_000 }, async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      // The URL `switchboard start` prints: the page takes the token from the fragment.
      await page.goto(`${base}/#token=${t.token}`);
      await expect.poll(() => page.getByTestId("notice").textContent()).toContain("scripted demo model");
      await page.getByLabel("Message").fill("hi from chromium");
      await page.getByRole("button", { name: "Send" }).click();
      await expect
        .poll(() => page.locator(".assistant").allTextContents(), { timeout: 20_000 })
        .toEqual(expect.arrayContaining([expect.stringContaining("You said: hi from chromium")]));
      await page.screenshot({ path: `${t.dir}/webchat.png` });
    } finally {
      await browser.close();
    }
  });
});
