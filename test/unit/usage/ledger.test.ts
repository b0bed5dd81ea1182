import { describe, expect, it } from "vitest";
import { type BudgetLimit, MemoryLedger, periodEnd, periodKey } from "../../../src/usage/ledger.js";

/** In-process budget accounting (API.md §8.4): reserve before a call, settle after. */
describe("MemoryLedger", () => {
  const limit: BudgetLimit = { scope: "global", period: "day", maxCostUsd: 1, maxTokens: null };

  it("20 parallel runs at the limit overspend by at most one call", async () => {
    const ledger = new MemoryLedger(() => Date.UTC(2026, 11, 6, 12));
    const callCost = 0.1;
    // spent 0.95 already: one more call may start (0.95 < 1), the rest must be refused
    const first = ledger.reserve([limit], { costUsd: 0.95, tokens: 0 });
    expect(first.ok).toBe(true);
    if (first.ok) ledger.settle(first.reservation, { costUsd: 0.95, tokens: 0 });
    const runs = Array.from({ length: 20 }, async () => {
      const a = ledger.reserve([limit], { costUsd: callCost, tokens: 0 });
      if (!a.ok) return false;
      await new Promise((r) => setTimeout(r, Math.random() * 5));
      ledger.settle(a.reservation, { costUsd: callCost, tokens: 0 });
      return true;
    });
    const admitted = (await Promise.all(runs)).filter(Boolean).length;
    expect(admitted).toBe(1);
    const spent = ledger.spent("global", "day").costUsd;
    expect(spent).toBeGreaterThan(1);
    expect(spent - 1).toBeLessThanOrEqual(callCost);
  });

  it("refuses naming the limit; a settled failure (0) frees its reservation; periods roll over", () => {
    let now = Date.UTC(2026, 11, 6, 23, 59);
    const ledger = new MemoryLedger(() => now);
    const tokens: BudgetLimit = { scope: "agent:main", period: "day", maxCostUsd: null, maxTokens: 100 };
    const a = ledger.reserve([limit, tokens], { costUsd: 0, tokens: 100 });
    expect(a.ok).toBe(true);
    const refused = ledger.reserve([limit, tokens], { costUsd: 0, tokens: 1 });
    expect(refused).toMatchObject({ ok: false, limit: { scope: "agent:main" } });
    if (a.ok) ledger.settle(a.reservation, { costUsd: 0, tokens: 0 });
    expect(ledger.reserve([tokens], { costUsd: 0, tokens: 1 }).ok).toBe(true);
    expect(periodKey("day", now)).toBe("day:2026-12-06");
    expect(periodEnd("day", now)).toBe(Date.UTC(2026, 11, 7));
    expect(periodEnd("month", now)).toBe(Date.UTC(2027, 0, 1));
    now += 120_000; // the next day: a fresh account
    expect(ledger.spent("agent:main", "day")).toEqual({ costUsd: 0, tokens: 0 });
  });
});
