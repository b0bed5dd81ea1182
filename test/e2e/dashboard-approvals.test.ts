import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApprovalsApp, userMessages } from "../approvals-fixture.js";
import type { TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { seedSession } from "../integration/tools/seed-sessions.js";
import { HAS_CHROMIUM, launchChromium } from "./web.js";

/**
 * Pending approvals on the operator dashboard (API.md §8.3) in headless Chromium: a request shows
 * up live with its tool, arguments, session and times, the model's arguments are shown as text
 * (never markup), "Allow once" resolves it over `approvals.resolve`, the run resumes with the tool
 * run once, and the row goes away on `approval.resolved`.
 */

const CHAT = "agent:main:dash-ap";
const TARGET = "agent:main:dash-target";
const HOSTILE = "<img src=x onerror='window.__xss=1'><b>bold</b>";
let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await startApprovalsApp({}, { listen: true, target: TARGET });
  base = `http://127.0.0.1:${t.app.address?.port}`;
  await seedSession(t, CHAT);
});
afterAll(async () => t?.stop());

const targetMessages = () => userMessages(t.rpc, TARGET);

describe.runIf(HAS_CHROMIUM)("dashboard: pending approvals", () => {
  it("lists a pending approval with three buttons; Allow once resumes the run and the row goes", {
    timeout: 30_000,
  }, async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/dashboard#token=${t.token}`);
      await expect
        .poll(() => page.getByTestId("status").textContent(), { timeout: 10_000 })
        .toContain("connected");
      await expect.poll(() => page.getByTestId("approval").count()).toBe(0);

      // The run pauses on the ask rule; the dashboard learns of it from approval.requested.
      const sent = await t.rpc("chat.send", {
        sessionKey: CHAT,
        message: `ping ${HOSTILE}`,
        timeoutSeconds: 0,
      });
      const runId = sent.result.runId as string;
      const ap = await eventually(async () => {
        const r = await t.rpc("approvals.list", {});
        return r.result.approvals[0] as { id: string; tool: string } | undefined;
      });
      const row = page.locator(`[data-testid="approval"][data-id="${ap.id}"]`);
      await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);
      const text = (await row.textContent()) ?? "";
      expect(text).toContain("sessions_send");
      expect(text).toContain(`session ${CHAT}`);
      expect(text).toContain(HOSTILE); // the model's argument, as text
      expect(text).toMatch(/requested .+ · expires .+/);
      expect(await row.locator("img, b").count()).toBe(0);
      expect(await page.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
      expect(await row.getByRole("button").allTextContents()).toEqual(["Allow once", "Allow always", "Deny"]);
      expect((await t.rpc("runs.get", { runId })).result.status).toBe("waiting");
      expect(await targetMessages()).toEqual([]);

      await row.getByRole("button", { name: "Allow once" }).click();
      const done = await t.rpc("agent.wait", { runId, timeoutMs: 10_000 });
      expect(done.result).toMatchObject({ status: "ok" });
      expect(done.result.reply).toContain("done:");
      // the tool ran once (the line it sent; a2a reply-back turns may follow it on a quick machine)
      expect((await targetMessages()).filter((c) => c === HOSTILE)).toEqual([HOSTILE]);
      await expect.poll(() => row.count(), { timeout: 5_000 }).toBe(0);
      await expect.poll(() => page.getByTestId("approvals").textContent()).toBe("None.");
      // allow-once stored no rule
      expect((await t.rpc("approvals.list", {})).result).toMatchObject({ approvals: [], always: [] });
    } finally {
      await browser.close();
    }
  });
});
