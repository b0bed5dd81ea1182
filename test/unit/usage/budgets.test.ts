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
});
