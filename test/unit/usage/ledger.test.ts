import { describe, expect, it } from "vitest";
import { type BudgetLimit, MemoryLedger, periodEnd, periodKey } from "../../../src/usage/ledger.js";

/** In-process budget accounting (API.md §8.4): reserve before a call, settle after. */
describe("MemoryLedger", () => {
  const limit: BudgetLimit = { scope: "global", period: "day", maxCostUsd: 1, maxTokens: null };
  const ttlMs = 60_000;
  let seq = 0;
  const opts = (extra: { takesOver?: string[] } = {}) => ({ id: `c${++seq}`, ttlMs, ...extra });

  it("20 parallel runs at the limit overspend by at most one call", async () => {
    const ledger = new MemoryLedger(() => Date.UTC(2026, 11, 6, 12));
    const callCost = 0.1;
    // spent 0.95 already: one more call may start (0.95 < 1), the rest must be refused
    const first = ledger.reserve([limit], { costUsd: 0.95, tokens: 0 }, opts());
    expect(first.ok).toBe(true);
    if (first.ok) ledger.settle(first.reservation, { costUsd: 0.95, tokens: 0 });
    const runs = Array.from({ length: 20 }, async () => {
      const a = ledger.reserve([limit], { costUsd: callCost, tokens: 0 }, opts());
      if (!a.ok) return false;
      await new Promise((r) => setTimeout(r, Math.random() * 5));
      ledger.settle(a.reservation, { costUsd: callCost, tokens: 0 });
      return true;
    });
    const admitted = (await Promise.all(runs)).filter(Boolean).length;
    expect(admitted).toBe(1);
    const { settled, reserved } = ledger.spent("global", "day");
    expect(settled.costUsd).toBeGreaterThan(1);
    expect(settled.costUsd - 1).toBeLessThanOrEqual(callCost);
    expect(reserved.costUsd).toBe(0);
  });

  it("refuses naming the limit; a settled failure (0) frees its reservation; periods roll over", () => {
    let now = Date.UTC(2026, 11, 6, 23, 59);
    const ledger = new MemoryLedger(() => now);
    const tokens: BudgetLimit = { scope: "agent:main", period: "day", maxCostUsd: null, maxTokens: 100 };
    const a = ledger.reserve([limit, tokens], { costUsd: 0, tokens: 100 }, opts());
    expect(a.ok).toBe(true);
    const refused = ledger.reserve([limit, tokens], { costUsd: 0, tokens: 1 }, opts());
    expect(refused).toMatchObject({ ok: false, limit: { scope: "agent:main" }, spent: { tokens: 100 } });
    if (a.ok)
      expect(ledger.settle(a.reservation, { costUsd: 0, tokens: 0 })).toEqual([
        { costUsd: 0, tokens: 0 },
        { costUsd: 0, tokens: 0 },
      ]);
    expect(ledger.reserve([tokens], { costUsd: 0, tokens: 1 }, opts()).ok).toBe(true);
    expect(periodKey("day", now)).toBe("day:2026-12-06");
    expect(periodEnd("day", now)).toBe(Date.UTC(2026, 11, 7));
    expect(periodEnd("month", now)).toBe(Date.UTC(2027, 0, 1));
    now += 120_000; // the next day: a fresh account
    expect(ledger.spent("agent:main", "day").settled).toEqual({ costUsd: 0, tokens: 0 });
  });

  it("periodKey is exact at every boundary, asked in any order (it keeps the last period's key)", () => {
    const midnight = Date.UTC(2026, 11, 7);
    const newYear = Date.UTC(2027, 0, 1);
    const asks: Array<[number, string, string]> = [
      [midnight - 1, "day:2026-12-06", "month:2026-12"],
      [midnight, "day:2026-12-07", "month:2026-12"],
      [midnight - 1, "day:2026-12-06", "month:2026-12"],
      [newYear - 1, "day:2026-12-31", "month:2026-12"],
      [newYear, "day:2027-01-01", "month:2027-01"],
      [midnight + 5, "day:2026-12-07", "month:2026-12"],
      [newYear + 1, "day:2027-01-01", "month:2027-01"],
    ];
    for (const [at, day, month] of asks) {
      expect(periodKey("day", at), new Date(at).toISOString()).toBe(day);
      expect(periodKey("month", at), new Date(at).toISOString()).toBe(month);
    }
  });

  it("a turn's hold is taken over by its first call without the limit check; holds lapse", () => {
    let now = Date.UTC(2026, 11, 6, 12);
    const ledger = new MemoryLedger(() => now);
    // two turns admitted at 0.5: the first pushes the account to 1.1, the second is refused
    const pre = ledger.reserve([limit], { costUsd: 0.5, tokens: 0 }, opts());
    if (pre.ok) ledger.settle(pre.reservation, { costUsd: 0.5, tokens: 0 });
    expect(ledger.reserve([limit], { costUsd: 0.6, tokens: 0 }, { id: "turn:a", ttlMs }).ok).toBe(true);
    expect(ledger.reserve([limit], { costUsd: 0.6, tokens: 0 }, { id: "turn:b", ttlMs }).ok).toBe(false);
    // the admitted turn's call goes, although settled + reserved is over the limit
    const call = ledger.reserve([limit], { costUsd: 0.4, tokens: 0 }, opts({ takesOver: ["turn:a"] }));
    expect(call.ok).toBe(true);
    expect(ledger.spent("global", "day").reserved.costUsd).toBeCloseTo(0.4, 9);
    // a call with no hold left is checked: 0.5 + 0.4 < 1 goes, then 1.3 ≥ 1 does not
    expect(ledger.reserve([limit], { costUsd: 0.4, tokens: 0 }, opts({ takesOver: ["turn:a"] })).ok).toBe(
      true,
    );
    expect(ledger.reserve([limit], { costUsd: 0.4, tokens: 0 }, opts({ takesOver: ["turn:a"] })).ok).toBe(
      false,
    );
    // reserving the same id again replaces it (a redelivered turn holds once)
    const fresh = new MemoryLedger(() => now);
    fresh.reserve([limit], { costUsd: 0.3, tokens: 0 }, { id: "turn:x", ttlMs });
    fresh.reserve([limit], { costUsd: 0.3, tokens: 0 }, { id: "turn:x", ttlMs });
    expect(fresh.spent("global", "day").reserved.costUsd).toBeCloseTo(0.3, 9);
    // a hold whose run never came lapses: its amount goes back
    now += ttlMs;
    fresh.reserve([limit], { costUsd: 0, tokens: 0 }, { id: "probe", ttlMs });
    expect(fresh.spent("global", "day").reserved.costUsd).toBe(0);
  });

  it("release gives back the holds still held, once, in the period they were reserved in (across a month end)", () => {
    let now = Date.UTC(2026, 11, 31, 23, 59, 59, 900);
    const ledger = new MemoryLedger(() => now);
    const month: BudgetLimit = { scope: "agent:main", period: "month", maxCostUsd: 1, maxTokens: null };
    const hold = { costUsd: 0.6, tokens: 60 };
    expect(ledger.reserve([limit, month], hold, { id: "turn:a", ttlMs }).ok).toBe(true);
    expect(ledger.reserve([limit, month], hold, { id: "turn:b", ttlMs }).ok).toBe(true);
    // 1.2 held: a third turn is refused while both holds stand
    expect(ledger.reserve([limit, month], hold, { id: "turn:c", ttlMs }).ok).toBe(false);
    // turn:b's first call takes its hold over; the turns end after UTC midnight, on a new month
    const call = ledger.reserve([limit, month], hold, opts({ takesOver: ["turn:b"] }));
    expect(call.ok).toBe(true);
    now = Date.UTC(2027, 0, 1, 0, 0, 0, 100);
    // turn:a made no call: its hold goes back; turn:b's was taken over, an unknown id is no hold
    expect(ledger.release(["turn:a", "turn:b", "turn:unknown"])).toBe(1);
    expect(ledger.release(["turn:a"])).toBe(0);
    // the accounts it was reserved on (the old day and month) hold only turn:b's call now
    now = Date.UTC(2026, 11, 31, 23, 59, 59, 950);
    expect(ledger.spent("global", "day").reserved).toEqual({ costUsd: 0.6, tokens: 60 });
    expect(ledger.spent("agent:main", "month").reserved).toEqual({ costUsd: 0.6, tokens: 60 });
    expect(ledger.reserve([limit, month], { costUsd: 0.1, tokens: 0 }, opts()).ok).toBe(true);
  });

  it("a warning is claimed once per period", () => {
    let now = Date.UTC(2026, 11, 6, 12);
    const ledger = new MemoryLedger(() => now);
    expect(ledger.claimOnce("day", "w")).toBe(true);
    expect(ledger.claimOnce("day", "w")).toBe(false);
    expect(ledger.claimOnce("month", "w")).toBe(true);
    now = Date.UTC(2026, 11, 7, 1);
    expect(ledger.claimOnce("day", "w")).toBe(true);
    expect(ledger.claimOnce("month", "w")).toBe(false);
  });
});
