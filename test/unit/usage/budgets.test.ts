import { describe, expect, it } from "vitest";
import { Budgets } from "../../../src/usage/budgets.js";
import { MemoryLedger } from "../../../src/usage/ledger.js";

/**
 * Budgets.release (API.md §8.4) asks the ledger whatever is configured now: the processes sharing
 * one ledger (bullmq, Redis) may run on different configs while one is restarted on a new one.
 * (The app gives a process configured with no budget at all no Redis ledger: see docs/budgets.md.)
 */
describe("Budgets.release", () => {
  const at = Date.UTC(2026, 11, 6, 12);
  const block = {
    scope: "agent:main",
    period: "day" as const,
    maxCostUsd: 0.5,
    maxTokens: null,
    warnAt: 0.8,
  };
  const ctx = { agentId: "main", sessionKey: "agent:main:main" };
  const turn = (runId: string) => ({ runId, text: "hi" });

  for (const [name, budgets] of [
    ["only a warn budget left", [{ ...block, action: "warn" as const }]],
    ["no budget left", []],
  ] as const) {
    it(`a hold admitted under a block budget is given back by a config with ${name}`, async () => {
      const ledger = new MemoryLedger(() => at);
      const admitting = new Budgets([{ ...block, action: "block" }], { ledger, now: () => at });
      expect(await admitting.admit(ctx, turn("r1"))).toBeNull();
      // the hold (4096 output tokens at no price: tokens only) is reserved on the account
      expect(ledger.spent("agent:main", "day").reserved.tokens).toBeGreaterThan(0);

      await new Budgets([...budgets], { ledger, now: () => at }).release(["r1"]);
      expect(ledger.spent("agent:main", "day").reserved).toEqual({ costUsd: 0, tokens: 0 });
    });
  }

  it("a turn whose first call took its hold over asks the ledger nothing when it ends; one whose call did not, once", async () => {
    const ledger = new MemoryLedger(() => at);
    let releases = 0;
    const release = ledger.release.bind(ledger);
    ledger.release = (ids) => {
      releases++;
      return release(ids);
    };
    const budgets = new Budgets([{ ...block, action: "block" }], { ledger, now: () => at });
    expect(await budgets.admit(ctx, turn("r1"))).toBeNull();
    const ticket = await budgets.reserve(ctx, {
      runId: "r1",
      index: 0,
      chain: ["oa/m"],
      promptTokens: 10,
      takesOver: ["r1"],
    });
    await budgets.settle(ticket, { costUsd: 0, tokens: 0 });
    await budgets.release(["r1"]);
    expect(releases).toBe(0);
    expect(ledger.spent("agent:main", "day").reserved).toEqual({ costUsd: 0, tokens: 0 });
    // a redelivery admitted again for the same run after that: its new hold is given back
    expect(await budgets.admit(ctx, turn("r1"))).toBeNull();
    await budgets.release(["r1"]);
    expect(releases).toBe(1);
    expect(ledger.spent("agent:main", "day").reserved).toEqual({ costUsd: 0, tokens: 0 });
  });
});
