import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { HAS_CHROMIUM, launchChromium } from "./web.js";

/**
 * The dashboard as an operator console, in headless Chromium: the tree shows a sub-agent with
 * its task, parent and status; each action asks for confirmation and goes through the ordinary
 * RPC (sessions.patch, tools.invoke → subagents, sessions.reset); the transcript ends at the
 * newest message with tool arguments pretty-printed once; filter; 375 px.
 */

const TOKEN = "console-token-0123456789";
const enabled = HAS_CHROMIUM;
let t: TestApp;
let base: string;
let browser: Browser;
let childKey = "";

beforeAll(async () => {
  if (!enabled) return;
  t = await startTestApp(
    {
      gateway: { port: 0, auth: { token: TOKEN } },
      tools: { profile: "full" },
      models: {
        default: "s/demo",
        providers: {
          s: {
            kind: "scripted",
            rules: [
              {
                match: "^spawn (.+)$",
                toolCalls: [{ name: "sessions_spawn", args: { task: "$1", label: "sheep" } }],
                afterTools: "spawned",
              },
              // The child works for a long time, so kill and steer have something to act on.
              { match: "\\[Subagent Task\\]: (.+)$", reply: "counted: $1", delayMs: 60_000 },
            ],
          },
        },
      },
    },
    { listen: true },
  );
  base = `http://127.0.0.1:${t.app.address?.port}`;
  const r = await t.rpc("chat.send", {
    sessionKey: "main",
    message: "spawn count the sheep",
    timeoutSeconds: 20,
  });
  expect(r.result.status).toBe("ok");
  const child = await eventually(
    async () => {
      const rows = await t.app.services.store.sessions.list({ limit: 20 });
      return rows.find((e) => e.spawnedBy === "agent:main:main");
    },
    300,
    20,
  );
  childKey = child.key;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await t?.stop();
});

async function open(width = 1200): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  await page.goto(`${base}/dashboard#token=${TOKEN}`);
  await expect.poll(() => page.locator(".row").count(), { timeout: 20_000 }).toBeGreaterThan(1);
  return page;
}

/** Answers the next confirm()/prompt() with `answer` (true = OK, false = Cancel, string = prompt text). */
function answerNext(page: Page, answer: boolean | string): void {
  page.once(
    "dialog",
    (d) => void (answer === false ? d.dismiss() : d.accept(typeof answer === "string" ? answer : undefined)),
  );
}

describe.runIf(enabled)("dashboard console", () => {
  it("transcript: newest at the bottom, scrolled there, tool arguments pretty-printed once; filter works", {
    timeout: 60_000,
  }, async () => {
    const page = await open();
    await page.locator('.row[data-key="agent:main:main"]').click();
    const tr = page.getByTestId("transcript");
    await expect.poll(() => tr.locator(".msg").count(), { timeout: 20_000 }).toBeGreaterThan(2);
    const texts = await tr.locator(".msg").allTextContents();
    const h = await t.rpc<{ messages: Array<{ content: unknown }> }>("sessions.history", {
      sessionKey: "agent:main:main",
      limit: 100,
      includeTools: true,
    });
    const newest = h.result?.messages.at(-1)?.content;
    expect(texts.some((x) => x.includes("spawn count the sheep"))).toBe(true);
    expect(texts.at(-1)).toContain(typeof newest === "string" ? newest.slice(0, 40) : "");
    const call = tr.locator('.msg[data-role="toolCall"] pre').first();
    const args = (await call.textContent()) ?? "";
    expect(args).toContain('"task": "count the sheep"');
    expect(args).not.toContain('\\"');
    const atBottom = await page.evaluate(
      `(() => { const t = document.getElementById("transcript"); return t.scrollHeight - t.scrollTop - t.clientHeight < 4; })()`,
    );
    expect(atBottom).toBe(true);
    expect(await page.getByTestId("timeline").locator('[data-testid="run"]').count()).toBeGreaterThan(0);

    await page.getByTestId("filter").fill("sheep");
    await expect.poll(() => page.locator(`.row[data-key="${childKey}"]`).count()).toBe(1);
    await page.getByTestId("filter").fill("no-such-session-xyz");
    await expect.poll(() => page.locator(".row").count()).toBe(0);
    await page.close();
  });

  it("shows lineage, status, task and parent; actions confirm and go through the RPC", {
    timeout: 90_000,
  }, async () => {
    const page = await open();
    const childRow = page.locator(
      `li:has(> .row[data-key="agent:main:main"]) li .row[data-key="${childKey}"]`,
    );
    await expect.poll(() => childRow.count()).toBe(1);
    const rowText = (await childRow.textContent()) ?? "";
    expect(rowText).toContain("sheep");
    expect(rowText).toContain("task: count the sheep");
    expect(rowText).toContain("running");
    expect(rowText).toMatch(/tok · \$/);

    await childRow.click();
    const card = page.getByTestId("card");
    await expect.poll(() => card.textContent()).toContain("parent");
    expect(await card.textContent()).toContain("agent:main:main");
    expect(await card.textContent()).toContain("count the sheep");

    // Send off, cancelled: nothing changes. Then accepted: the session's policy is deny.
    answerNext(page, false);
    await card.getByRole("button", { name: "Send off" }).click();
    expect((await t.app.services.store.sessions.get(childKey))?.sendPolicy).toBeUndefined();
    answerNext(page, true);
    await card.getByRole("button", { name: "Send off" }).click();
    await expect
      .poll(async () => (await t.app.services.store.sessions.get(childKey))?.sendPolicy)
      .toBe("deny");
    answerNext(page, true);
    await page.getByTestId("card").getByRole("button", { name: "Send on" }).click();
    await expect
      .poll(async () => (await t.app.services.store.sessions.get(childKey))?.sendPolicy)
      .toBe("allow");
    answerNext(page, true);
    await page.getByTestId("card").getByRole("button", { name: "Send inherit" }).click();
    await expect
      .poll(async () => (await t.app.services.store.sessions.get(childKey))?.sendPolicy)
      .toBeUndefined();

    // Steer the running child: the message reaches it as steering (subagents tool, as its parent).
    answerNext(page, "count only the black sheep");
    await page.getByTestId("card").getByRole("button", { name: "Steer" }).click();
    await expect
      .poll(() => page.locator("#notice").textContent(), { timeout: 10_000 })
      .toMatch(/Steer .*(done|failed)/);
    expect(await page.locator("#notice").textContent()).toContain("done");

    // Kill: the child's run ends aborted.
    answerNext(page, true);
    await page.getByTestId("card").getByRole("button", { name: "Kill" }).click();
    await expect.poll(() => page.locator("#notice").textContent(), { timeout: 10_000 }).toContain("Kill");
    expect(await page.locator("#notice").textContent()).toContain("done");
    const child = await t.app.services.store.sessions.get(childKey);
    const [run] = await t.app.services.store.runs.listBySession(childKey, 1);
    await expect
      .poll(async () => (await t.app.services.store.runs.get(run?.runId ?? ""))?.status, { timeout: 10_000 })
      .toMatch(/aborted|killed/);
    expect(child).not.toBeNull();

    // Reset goes to sessions.reset: done where that method exists, otherwise its error is shown.
    await page.locator('.row[data-key="agent:main:main"]').click();
    await expect.poll(() => page.getByTestId("card").textContent()).toContain("agent:main:main");
    answerNext(page, true);
    await page.getByTestId("card").getByRole("button", { name: "Reset" }).click();
    await expect
      .poll(() => page.locator("#notice").textContent(), { timeout: 10_000 })
      .toContain("Reset agent:main:main");
    await page.close();
  });

  it("at 375 px nothing is wider than the viewport", { timeout: 60_000 }, async () => {
    const page = await open(375);
    await page.locator(`.row[data-key="${childKey}"]`).click();
    await expect.poll(() => page.getByTestId("card").textContent()).toContain("count the sheep");
    await expect
      .poll(() => page.getByTestId("transcript").locator(".msg").count(), { timeout: 20_000 })
      .toBeGreaterThan(0);
    const overflow = (await page.evaluate(`(() => {
      const w = document.documentElement.clientWidth;
      const wide = [...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > w + 1);
      return { w, wide: wide.map((el) => el.tagName + "." + el.className), scroll: document.documentElement.scrollWidth };
    })()`)) as { w: number; wide: string[]; scroll: number };
    expect(overflow.wide).toEqual([]);
    expect(overflow.scroll).toBeLessThanOrEqual(overflow.w);
    const width = (await page.evaluate(
      `document.getElementById("transcript").getBoundingClientRect().width`,
    )) as number;
    expect(width).toBeGreaterThan(300); // the transcript gets the screen's width, not a sliver
    await page.close();
  });

  it("without the token: a clear screen, no data", { timeout: 60_000 }, async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard`);
    await expect.poll(() => page.getByTestId("gate").isVisible(), { timeout: 20_000 }).toBe(true);
    expect(await page.getByTestId("gate").textContent()).toContain("Open the URL printed");
    expect(await page.locator(".row").count()).toBe(0);
    await page.close();
  });
});
