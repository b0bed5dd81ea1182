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
  let seq = 0;
  const opts = (extra: { takesOver?: string[] } = {}) => ({ id: `c${++seq}`, ttlMs: 60_000, ...extra });

  it("20 parallel admissions at the limit, from four connections, overspend by at most one call", async () => {
    const ledgers = clients.map((c) => new RedisLedger(c, prefix, () => at));
    const call = { costUsd: 0.1, tokens: 100 };
    // 0.95 spent already: one more call fits under the limit, and only one
    const warm = await ledgers[0]!.reserve([limit, global], { costUsd: 0, tokens: 0 }, opts());
    if (!warm.ok) throw new Error("refused");
    await ledgers[0]!.settle(warm.reservation, { costUsd: 0.95, tokens: 950 });

    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const ledger = ledgers[i % ledgers.length]!;
        const a = await ledger.reserve([limit, global], call, opts());
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
    const a = await ledger.reserve([tok], { costUsd: 0, tokens: 400 }, opts());
    expect(a.ok).toBe(true);
    const b = await ledger.reserve([tok], { costUsd: 0, tokens: 400 }, opts());
    expect(b.ok).toBe(true); // 400 reserved < 500
    const c = await ledger.reserve([tok], { costUsd: 0, tokens: 400 }, opts());
    expect(c).toMatchObject({ ok: false, limit: { scope: "channel:telegram" }, spent: { tokens: 800 } });
    if (a.ok) await ledger.settle(a.reservation, { costUsd: 0, tokens: 0 });
    if (b.ok) await ledger.settle(b.reservation, { costUsd: 0, tokens: 0 });
    expect(await ledger.spent("channel:telegram", "day")).toEqual({
      settled: { costUsd: 0, tokens: 0 },
      reserved: { costUsd: 0, tokens: 0 },
    });
  });

  it("a turn's hold is taken over by its first call unchecked, lapses when its run never comes; warnings once", async () => {
    let now = at;
    const ledger = new RedisLedger(clients[0]!, `${prefix}c:`, () => now);
    const other = new RedisLedger(clients[1]!, `${prefix}c:`, () => now);
    const pre = await ledger.reserve([limit], { costUsd: 0.5, tokens: 0 }, opts());
    if (pre.ok) await ledger.settle(pre.reservation, { costUsd: 0.5, tokens: 0 });
    // two turns at 0.5: the first is admitted (and its hold brings the account to 1.1), the second not
    expect(
      (await ledger.reserve([limit], { costUsd: 0.6, tokens: 0 }, { id: "turn:a", ttlMs: 1000 })).ok,
    ).toBe(true);
    expect(
      (await other.reserve([limit], { costUsd: 0.6, tokens: 0 }, { id: "turn:b", ttlMs: 1000 })).ok,
    ).toBe(false);
    // the admitted turn's first call (in another process) goes, over the limit, in place of the hold
    const call = await other.reserve([limit], { costUsd: 0.4, tokens: 0 }, opts({ takesOver: ["turn:a"] }));
    expect(call.ok).toBe(true);
    expect((await ledger.spent("agent:main", "day")).reserved.costUsd).toBeCloseTo(0.4, 9);
    if (call.ok)
      expect(await other.settle(call.reservation, { costUsd: 0.3, tokens: 7 })).toEqual([
        { costUsd: 0.8, tokens: 7 },
      ]);
    // a hold taken again with the same id replaces it; one whose run never came lapses
    await ledger.reserve([limit], { costUsd: 0.1, tokens: 0 }, { id: "turn:x", ttlMs: 1000 });
    await ledger.reserve([limit], { costUsd: 0.1, tokens: 0 }, { id: "turn:x", ttlMs: 1000 });
    expect((await ledger.spent("agent:main", "day")).reserved.costUsd).toBeCloseTo(0.1, 9);
    now += 1000;
    const probe = await ledger.reserve([limit], { costUsd: 0.1, tokens: 0 }, opts());
    expect(probe.ok).toBe(true); // 0.8 settled, the lapsed 0.1 given back
    if (probe.ok) await ledger.settle(probe.reservation, { costUsd: 0, tokens: 0 });
    expect((await ledger.spent("agent:main", "day")).reserved.costUsd).toBeCloseTo(0, 9);
    expect(await clients[0]!.zcard(`${prefix}c:budget:day:2026-12-06:held`)).toBe(0);
    // a warning is claimed by one process only, once per period
    const claims = await Promise.all([ledger.claimOnce("day", "w0"), other.claimOnce("day", "w0")]);
    expect(claims.filter(Boolean)).toHaveLength(1);
  });

  it("release gives back the holds still held, once, in the period they were reserved in (across a month end)", async () => {
    let now = Date.UTC(2026, 11, 31, 23, 59, 59, 900);
    const p = `${prefix}d:`;
    const ledger = new RedisLedger(clients[0]!, p, () => now);
    const month: BudgetLimit = { scope: "agent:main", period: "month", maxCostUsd: 1, maxTokens: null };
    const hold = { costUsd: 0.6, tokens: 60 };
    expect((await ledger.reserve([limit, month], hold, { id: "turn:a", ttlMs: 60_000 })).ok).toBe(true);
    expect((await ledger.reserve([limit, month], hold, { id: "turn:b", ttlMs: 60_000 })).ok).toBe(true);
    // 1.2 held: a third turn is refused while both holds stand
    expect((await ledger.reserve([limit, month], hold, { id: "turn:c", ttlMs: 60_000 })).ok).toBe(false);
    const call = await ledger.reserve([limit, month], hold, opts({ takesOver: ["turn:b"] }));
    expect(call.ok).toBe(true);
    // the turns end after UTC midnight, on a new month (another process releases: no state but Redis)
    now = Date.UTC(2027, 0, 1, 0, 0, 0, 100);
    const worker = new RedisLedger(clients[1]!, p, () => now);
    expect(await worker.release(["turn:a", "turn:b", "turn:unknown"])).toBe(1);
    expect(await worker.release(["turn:a"])).toBe(0);
    // in the day and month it was reserved in (as a process whose clock is behind still sees them),
    // only turn:b's call is held, and turns are admitted again
    now = Date.UTC(2026, 11, 31, 23, 59, 59, 950);
    expect((await ledger.spent("agent:main", "day")).reserved).toEqual({ costUsd: 0.6, tokens: 60 });
    expect((await ledger.spent("agent:main", "month")).reserved).toEqual({ costUsd: 0.6, tokens: 60 });
    expect(await clients[0]!.zrange(`${p}budget:day:2026-12-31:held`, "0", "-1")).toEqual([`c${seq}`]);
    expect(await clients[0]!.zrange(`${p}budget:month:2026-12:held`, "0", "-1")).toEqual([`c${seq}`]);
    expect((await ledger.reserve([limit, month], { costUsd: 0.1, tokens: 0 }, opts())).ok).toBe(true);
    // a hold released in the period it was reserved in goes back the same way
    now = Date.UTC(2027, 0, 1, 12);
    expect((await ledger.reserve([limit], hold, { id: "turn:d", ttlMs: 60_000 })).ok).toBe(true);
    expect(await worker.release(["turn:d"])).toBe(1);
    expect((await ledger.spent("agent:main", "day")).reserved).toEqual({ costUsd: 0, tokens: 0 });
  });
});
