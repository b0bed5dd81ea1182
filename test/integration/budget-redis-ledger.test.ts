import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { BudgetLimit } from "../../src/usage/ledger.js";
import { RedisLedger } from "../../src/usage/redis-ledger.js";
import { randomPrefix } from "../helpers.js";
import { describeRedis, newRedisClient } from "../redis.js";

/** The Redis budget ledger (API.md §8.4): reserve/admit in one Lua script, settle after. */
describeRedis("budget ledger in Redis", () => {
  const prefix = randomPrefix("budget");
  const clients: Redis[] = [];
  beforeAll(() => {
    for (let i = 0; i < 4; i++) clients.push(newRedisClient());
  });
  afterAll(async () => {
    const keys = await clients[0]!.keys(`${prefix}*`);
    if (keys.length > 0) await clients[0]!.del(...keys);
    await Promise.all(clients.map((c) => c.quit()));
  });

  const at = Date.UTC(2026, 11, 6, 12);
  const limit: BudgetLimit = { scope: "agent:main", period: "day", maxCostUsd: 1, maxTokens: null };
  const global: BudgetLimit = { scope: "global", period: "month", maxCostUsd: null, maxTokens: 1_000_000 };

  it("20 parallel admissions at the limit, from four connections, overspend by at most one call", async () => {
    const ledgers = clients.map((c) => new RedisLedger(c, prefix, () => at));
    const call = { costUsd: 0.1, tokens: 100 };
    // 0.95 spent already: one more call fits under the limit, and only one
    const warm = await ledgers[0]!.reserve([limit, global], { costUsd: 0, tokens: 0 });
    if (!warm.ok) throw new Error("refused");
    await ledgers[0]!.settle(warm.reservation, { costUsd: 0.95, tokens: 950 });

    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const ledger = ledgers[i % ledgers.length]!;
        const a = await ledger.reserve([limit, global], call);
        if (a.ok) await ledger.settle(a.reservation, call);
        return a;
      }),
    );
    const admitted = results.filter((r) => r.ok);
    expect(admitted).toHaveLength(1);
    const refused = results.find((r) => !r.ok);
    expect(refused).toMatchObject({ ok: false, limit: { scope: "agent:main", period: "day" } });
    const spent = await ledgers[0]!.spent("agent:main", "day");
    expect(spent.reserved.costUsd).toBeCloseTo(0, 9);
    expect(spent.settled.costUsd).toBeCloseTo(1.05, 9);
    expect(spent.settled.costUsd).toBeLessThanOrEqual(limit.maxCostUsd! + call.costUsd + 1e-9);
    // the month's global account counted the same calls
    expect((await ledgers[1]!.spent("global", "month")).settled.tokens).toBe(1050);
    // the accounts expire (a day after their period ends)
    const ttl = await clients[0]!.pttl(`${prefix}budget:day:2026-12-06`);
    expect(ttl).toBeGreaterThan(0);
  });

  it("a failed call settles to nothing; a token limit refuses naming it", async () => {
    const ledger = new RedisLedger(clients[0]!, `${prefix}b:`, () => at);
    const tok: BudgetLimit = { scope: "channel:telegram", period: "day", maxCostUsd: null, maxTokens: 500 };
    const a = await ledger.reserve([tok], { costUsd: 0, tokens: 400 });
    expect(a.ok).toBe(true);
    const b = await ledger.reserve([tok], { costUsd: 0, tokens: 400 });
    expect(b.ok).toBe(true); // 400 reserved < 500
    const c = await ledger.reserve([tok], { costUsd: 0, tokens: 400 });
    expect(c).toMatchObject({ ok: false, limit: { scope: "channel:telegram" }, spent: { tokens: 800 } });
    if (a.ok) await ledger.settle(a.reservation, { costUsd: 0, tokens: 0 });
    if (b.ok) await ledger.settle(b.reservation, { costUsd: 0, tokens: 0 });
    expect(await ledger.spent("channel:telegram", "day")).toEqual({
      settled: { costUsd: 0, tokens: 0 },
      reserved: { costUsd: 0, tokens: 0 },
    });
  });
});
