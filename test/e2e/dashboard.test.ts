import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { HAS_CHROMIUM, launchChromium } from "./web.js";

/** The operator dashboard in headless Chromium: sessions tree by spawnedBy, transcript, live runs. */

let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await startTestApp({ gateway: { auth: { token: "dash-token-12345" } } }, { listen: true });
  base = `http://127.0.0.1:${t.app.address?.port}`;
});
afterAll(async () => t?.stop());

describe.runIf(HAS_CHROMIUM)("dashboard", () => {
  it("shows the sessions tree with a spawned child, a transcript, and live runs", {
    timeout: 60_000,
  }, async () => {
    // The demo model turns "spawn <task>" into sessions_spawn: main gets a child.
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
      200,
      20,
    );

    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/dashboard#token=dash-token-12345`);
      // The child is nested under main in the tree.
      const nested = page.locator(
        `li:has(> .row[data-key="agent:main:main"]) li .row[data-key="${child.key}"]`,
      );
      await expect.poll(() => nested.count(), { timeout: 20_000 }).toBe(1);
      await page.locator('.row[data-key="agent:main:main"]').click();
      await expect
        .poll(() => page.getByTestId("detail").textContent(), { timeout: 20_000 })
        .toContain("spawn count the sheep");
      // A new run shows up live.
      await t.rpc("chat.send", { sessionKey: "agent:main:live", message: "hello", timeoutSeconds: 20 });
      await expect
        .poll(() => page.getByTestId("runs").textContent(), { timeout: 20_000 })
        .toContain("agent:main:live");
    } finally {
      await browser.close();
    }
  });

  it("without the token the dashboard shows the auth error instead of data", {
    timeout: 60_000,
  }, async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/dashboard`);
      await expect.poll(() => page.getByTestId("gate").isVisible(), { timeout: 20_000 }).toBe(true);
      expect(await page.locator("#status").textContent()).toBe("token needed");
      expect(await page.getByTestId("tree").locator(".row").count()).toBe(0);
    } finally {
      await browser.close();
    }
  });
});
