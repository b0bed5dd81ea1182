import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../harness.js";
import { HAS_CHROMIUM, launchChromium } from "./web.js";

/** The dashboard's cron panel in headless Chromium: jobs with next run, last status and "run now". */

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

describe.runIf(HAS_CHROMIUM)("dashboard cron panel", () => {
  it("lists jobs with their next run and runs one on request", { timeout: 60_000 }, async () => {
    const browser = await launchChromium();
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
