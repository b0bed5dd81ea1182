import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";
import { HAS_CHROMIUM, launchChromium } from "./web.js";

/**
 * The dashboard's spend panel in headless Chromium: spend per agent per day as bars, the day's
 * total as a line, day budgets as horizontal lines, and this month's cumulative spend against a
 * month budget — from turns run on three days through the real turn path (priced fake model).
 */

const DAY = 86_400_000;
const TODAY = Date.UTC(2026, 11, 6, 12);
let clock = TODAY - 2 * DAY;
let fake: OpenAIFake;
let t: TestApp;
let base: string;

beforeAll(async () => {
  fake = await startOpenAIFake();
  t = await startTestApp(
    {
      gateway: { auth: { token: "dash-token-12345" } },
      agents: { list: [{ id: "main" }, { id: "research" }] },
      models: {
        default: "oa/m",
        providers: {
          oa: {
            kind: "openai",
            baseUrl: fake.url,
            // $1 per 1,000 tokens
            models: { m: { price: { inputPerMTok: 1000, outputPerMTok: 1000 } } },
          },
        },
      },
      usage: {
        budgets: [
          { scope: "global", period: "day", maxCostUsd: 0.9, action: "warn" },
          { scope: "agent:main", period: "day", maxCostUsd: 0.5, action: "warn" },
          { scope: "global", period: "month", maxCostUsd: 2, action: "warn" },
          { scope: "agent:research", period: "day", maxTokens: 5000, action: "warn" },
        ],
      },
    },
    { listen: true, now: () => clock },
  );
  base = `http://127.0.0.1:${t.app.address?.port}`;
  // three days of turns: [day offset, agent, tokens]; $0.001 a token
  const turns: Array<[number, string, number]> = [
    [-2, "main", 300],
    [-1, "main", 200],
    [-1, "research", 400],
    [0, "main", 600],
    [0, "research", 100],
  ];
  for (const [offset, agent, tokens] of turns) {
    clock = TODAY + offset * DAY;
    fake.enqueue({ text: "ok", usage: { prompt: tokens - 50, completion: 50 } });
    const r = await t.rpc("chat.send", { sessionKey: `agent:${agent}:s`, message: "hi", timeoutSeconds: 20 });
    expect(r.result?.status).toBe("ok");
  }
  clock = TODAY;
}, 60_000);
afterAll(async () => {
  await t?.stop();
  await fake?.close();
});

describe.runIf(HAS_CHROMIUM)("dashboard spend panel", () => {
  it("draws bars per agent per day, the day totals, the day budgets and the month's cumulative spend", {
    timeout: 60_000,
  }, async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
      await page.goto(`${base}/dashboard/usage#token=dash-token-12345`);
      const bars = page.locator('#daily rect[data-testid="bar"]');
      await expect.poll(() => bars.count(), { timeout: 20_000 }).toBe(5);
      const bar = async (day: string, key: string) => {
        const b = page.locator(`#daily rect[data-day="${day}"][data-key="${key}"]`);
        return {
          cost: Number(await b.getAttribute("data-cost")),
          y: Number(await b.getAttribute("y")),
          h: Number(await b.getAttribute("height")),
        };
      };
      const main6 = await bar("2026-12-06", "main");
      const res6 = await bar("2026-12-06", "research");
      const main4 = await bar("2026-12-04", "main");
      expect(main6.cost).toBeCloseTo(0.6, 6);
      expect(res6.cost).toBeCloseTo(0.1, 6);
      expect(main4.cost).toBeCloseTo(0.3, 6);
      // heights are proportional to spend, on one baseline
      expect(main6.h / res6.h).toBeCloseTo(6, 1);
      expect(main6.y + main6.h).toBeCloseTo(res6.y + res6.h, 3);
      // the day totals as points
      const total = async (day: string) =>
        Number(
          await page
            .locator(`#daily circle[data-testid="total-point"][data-day="${day}"]`)
            .getAttribute("data-cost"),
        );
      expect(await total("2026-12-05")).toBeCloseTo(0.6, 6);
      expect(await total("2026-12-06")).toBeCloseTo(0.7, 6);
      // day budgets as horizontal lines on the same scale: main's $0.60 bar rises above its $0.50 line
      const line = page.locator('#daily line[data-testid="budget-line"][data-scope="agent:main"]');
      expect(await line.getAttribute("data-value")).toBe("0.5");
      const lineY = Number(await line.getAttribute("y1"));
      expect(Number(await line.getAttribute("y2"))).toBe(lineY);
      expect(main6.y).toBeLessThan(lineY);
      expect(main4.y).toBeGreaterThan(lineY);
      const globalLine = page.locator('#daily line[data-testid="budget-line"][data-scope="global"]');
      expect(await globalLine.getAttribute("data-period")).toBe("day");
      expect(Number(await globalLine.getAttribute("y1"))).toBeLessThan(lineY);
      // no month budget in the daily chart, no day budget in the month chart
      expect(await page.locator('#daily line[data-period="month"]').count()).toBe(0);
      expect(await page.locator('#month line[data-period="day"]').count()).toBe(0);
      // this month: cumulative total over Dec 1–6, ending at $1.60, under the $2 month budget line
      const cum = page.locator('#month polyline[data-testid="cum-line"][data-scope="global"]');
      expect(Number(await cum.getAttribute("data-cost"))).toBeCloseTo(1.6, 6);
      expect(await page.locator('#month circle[data-testid="cum-point"][data-scope="global"]').count()).toBe(
        6,
      );
      const monthLine = page.locator('#month line[data-testid="budget-line"][data-scope="global"]');
      expect(await monthLine.getAttribute("data-period")).toBe("month");
      const lastY = Number((await cum.getAttribute("points"))?.split(" ").pop()?.split(",")[1]);
      expect(lastY).toBeGreaterThan(Number(await monthLine.getAttribute("y1")));
      // a token budget is listed, not drawn
      expect(await page.locator('[data-testid="notes"]').textContent()).toContain(
        "agent:research per day: 5000 tokens (warn) — a token limit, not drawn",
      );
      expect(await page.locator('[data-testid="legend"]').textContent()).toBe("mainresearchtotal");
      await page.screenshot({ path: "/tmp/usagechart-dashboard.png", fullPage: true });

      // a new turn shows up without a reload (run.finished refreshes the panel)
      fake.enqueue({ text: "ok", usage: { prompt: 150, completion: 50 } });
      const r = await t.rpc("chat.send", {
        sessionKey: "agent:research:s",
        message: "hi",
        timeoutSeconds: 20,
      });
      expect(r.result?.status).toBe("ok");
      await expect
        .poll(async () => (await bar("2026-12-06", "research")).cost, { timeout: 20_000 })
        .toBeCloseTo(0.3, 6);
    } finally {
      await browser.close();
    }
  });
});
