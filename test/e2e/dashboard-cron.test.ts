import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../harness.js";

/** The dashboard's cron panel in headless Chromium: jobs with next run, last status and "run now". */

const CHROMIUM = "/usr/bin/chromium";
let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await startTestApp(
    {
      gateway: { auth: { token: "dash-token-12345" } },
      cron: {
        jobs: [{ id: "morning", schedule: { cron: "0 7 * * *", tz: "Europe/Berlin" }, message: "brief me" }],
      },
    },
    { listen: true },
  );
  base = `http://127.0.0.1:${t.app.address?.port}`;
});
afterAll(async () => t?.stop());

describe.runIf(existsSync(CHROMIUM) || process.env.CI === "true")("dashboard cron panel", () => {
  it("lists jobs with their next run and runs one on request", { timeout: 60_000 }, async () => {
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
    });
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/dashboard/cron#token=dash-token-12345`);
      const row = page.locator('tr[data-job="morning"]');
      await expect.poll(() => row.count(), { timeout: 20_000 }).toBe(1);
      expect(await row.textContent()).toContain("cron 0 7 * * * (Europe/Berlin)");
      expect(await row.locator('[data-testid="next"]').textContent()).not.toBe("–");
      expect(await row.locator('[data-testid="last"]').textContent()).toBe("–");
      await row.locator('[data-testid="run"]').click();
      await expect
        .poll(() => row.locator('[data-testid="last"]').textContent(), { timeout: 20_000 })
        .toMatch(/^ok · /);
      const runs = (await t.rpc("cron.runs", { id: "morning" })).result.runs;
      expect(runs[0]).toMatchObject({ status: "ok", trigger: "manual" });
    } finally {
      await browser.close();
    }
  });
});
