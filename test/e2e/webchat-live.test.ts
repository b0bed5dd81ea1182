import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";
import { HAS_CHROMIUM, launchChromium } from "./web.js";

/**
 * The web chat as a person uses it, in headless Chromium against a streaming OpenAI-compatible
 * fake: tokens render as they arrive, Markdown is rendered and sanitised, history survives a
 * reload, a failed turn shows an error with a retry, the token screen, and 375 px.
 */

const TOKEN = "webchat-test-token-0123456789";
const MD_REPLY = [
  "Here is **bold** text and a snippet:",
  "",
  "```js",
  "const answer = 42;",
  "```",
  "",
  "That is all for now, thanks for asking.",
].join("\n");
const LONG_ID = `agent:main:subagent:${"0123456789abcdef".repeat(8)}`;
const LONG_JSON = JSON.stringify({
  key: LONG_ID,
  nested: { list: Array.from({ length: 30 }, (_, i) => `item-${i}`) },
});

let oa: OpenAIFake;
let t: TestApp;
let base: string;
let browser: Browser;

const enabled = HAS_CHROMIUM;

beforeAll(async () => {
  if (!enabled) return;
  oa = await startOpenAIFake();
  t = await startTestApp(
    {
      gateway: { port: 0, auth: { token: TOKEN } },
      models: {
        default: "oa/fake-model",
        providers: { oa: { kind: "openai", baseUrl: oa.url, maxRetries: 0 } },
      },
    },
    { listen: true },
  );
  base = `http://127.0.0.1:${t.app.address?.port}`;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await t?.stop();
  await oa?.close();
});

async function openChat(width = 1000): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: 800 } });
  await page.goto(`${base}/#token=${TOKEN}`);
  await expect.poll(() => page.getByTestId("conn").getAttribute("data-state")).toBe("connected");
  return page;
}

async function say(page: Page, text: string): Promise<void> {
  await page.getByLabel("Message").fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

describe.runIf(enabled)("web chat, live", () => {
  it("renders tokens as they arrive, as sanitised Markdown with a copyable code block; history survives a reload", {
    timeout: 60_000,
  }, async () => {
    const page = await openChat();
    // Record every text the reply bubble shows while it streams.
    // Record every text the reply bubble shows while it streams (browser-side code as a string: no DOM types here).
    await page.evaluate(`(() => {
      window.__seen = [];
      new MutationObserver(() => {
        const last = [...document.querySelectorAll(".assistant")].at(-1);
        const text = last ? last.textContent : "";
        if (text && window.__seen.at(-1) !== text) window.__seen.push(text);
      }).observe(document.getElementById("log"), { childList: true, subtree: true, characterData: true });
    })()`);
    oa.enqueue({ text: MD_REPLY, chunkDelayMs: 60 });
    await say(page, "show me markdown");
    await expect
      .poll(() => page.locator(".assistant").last().textContent(), { timeout: 20_000 })
      .toContain("thanks for asking.");
    const seen = (await page.evaluate("window.__seen")) as string[];
    expect(seen.length).toBeGreaterThanOrEqual(4); // several partial texts before the end
    const partial = seen.find((s) => s.includes("Here is") && !s.includes("thanks"));
    expect(partial).toBeDefined();

    const bubble = page.locator(".assistant").last();
    await expect.poll(() => bubble.locator("strong").textContent()).toBe("bold");
    const code = bubble.locator("pre code");
    expect(await code.textContent()).toBe("const answer = 42;\n");
    expect(
      await page.evaluate(
        `getComputedStyle([...document.querySelectorAll(".assistant pre code")].at(-1)).fontFamily`,
      ),
    ).toMatch(/mono|Menlo|Consolas/i);
    expect(await bubble.locator("pre button.copy").count()).toBe(1);

    await page.reload();
    await expect.poll(() => page.getByTestId("conn").getAttribute("data-state")).toBe("connected");
    await expect.poll(() => page.locator(".user").allTextContents()).toContain("show me markdown");
    await expect.poll(() => page.locator(".assistant strong").count()).toBeGreaterThan(0);
    await page.close();
  });

  it("raw HTML from the model never executes", { timeout: 60_000 }, async () => {
    const page = await openChat();
    oa.enqueue({
      text: 'Try this <img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script> or [click](javascript:window.__pwned=3) <iframe src="javascript:window.__pwned=4"></iframe> end-marker',
    });
    await say(page, "inject");
    await expect
      .poll(() => page.locator(".assistant").last().textContent(), { timeout: 20_000 })
      .toContain("end-marker");
    const bubble = page.locator(".assistant").last();
    expect(await bubble.locator("script, iframe").count()).toBe(0);
    expect(await bubble.locator("[onerror]").count()).toBe(0);
    const href = await bubble
      .locator("a")
      .first()
      .getAttribute("href")
      .catch(() => null);
    expect(href ?? "").not.toMatch(/^javascript:/i);
    await bubble
      .locator("a")
      .first()
      .click({ timeout: 1000 })
      .catch(() => {});
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    await page.close();
  });

  it("a model failure shows an error bubble with a retry that works", { timeout: 60_000 }, async () => {
    const page = await openChat();
    // a 500 gets one quick retry on the same model (the failover chain, API.md §8.4): fail both
    oa.enqueue(
      { status: 500, error: "upstream exploded at /srv/model.py:12" },
      { status: 500, error: "upstream exploded at /srv/model.py:12" },
    );
    await say(page, "this will fail");
    const err = page.locator(".error").last();
    await expect.poll(() => err.textContent(), { timeout: 20_000 }).toContain("couldn't finish");
    const text = (await err.textContent()) ?? "";
    expect(text).not.toMatch(/exploded|\.py|HTTP|stack/);
    expect(await page.locator(".error").count()).toBe(1);
    await expect.poll(() => page.getByTestId("typing").textContent()).toBe("");
    oa.enqueue({ text: "second time lucky" });
    await err.getByRole("button", { name: "Retry" }).click();
    await expect
      .poll(() => page.locator(".assistant").last().textContent(), { timeout: 20_000 })
      .toContain("second time lucky");
    await page.close();
  });

  it("without the token: one clear screen, no repeating errors", { timeout: 60_000 }, async () => {
    const page = await browser.newPage();
    let sockets = 0;
    page.on("websocket", () => sockets++);
    await page.goto(`${base}/`);
    await expect.poll(() => page.getByTestId("gate").isVisible()).toBe(true);
    expect(await page.getByTestId("gate").textContent()).toContain("Open the URL printed");
    await expect.poll(() => page.getByTestId("conn").getAttribute("data-state")).toBe("locked");
    expect(await page.locator(".msg").count()).toBe(0);
    expect(sockets).toBe(1);
    await page.close();
  });

  it("at 375 px nothing is wider than the viewport, even long ids and JSON", {
    timeout: 60_000,
  }, async () => {
    const page = await openChat(375);
    oa.enqueue({ text: `Key: ${LONG_ID}\n\n\`\`\`json\n${LONG_JSON}\n\`\`\`\n\n${LONG_JSON}` });
    await say(page, LONG_ID);
    await expect.poll(() => page.locator(".assistant pre").count(), { timeout: 20_000 }).toBeGreaterThan(0);
    const overflow = (await page.evaluate(`(() => {
      const w = document.documentElement.clientWidth;
      const wide = [...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > w + 1);
      return { w, wide: wide.map((el) => el.tagName + "." + el.className), scroll: document.documentElement.scrollWidth };
    })()`)) as { w: number; wide: string[]; scroll: number };
    expect(overflow.wide).toEqual([]);
    expect(overflow.scroll).toBeLessThanOrEqual(overflow.w);
    await page.close();
  });
});
