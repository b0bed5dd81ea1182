import type { Redis } from "ioredis";
import { afterAll, afterEach, expect, it } from "vitest";
import { RedisKeys } from "../../../src/store/redis/keys.js";
import type { CountedTurn } from "../../../src/usage/counter.js";
import { RedisUsageCounts } from "../../../src/usage/redis-counts.js";
import { randomPrefix } from "../../helpers.js";
import { describeRedis, dropPrefix, newRedisClient } from "../../redis.js";

/** Usage counts in Redis (storage.driver "redis", API.md §8.4), against the real Redis. */

const DAY = 86_400_000;
// Noon (UTC) of today: expiry times are absolute, so the test's days must be real ones.
const T0 = Math.floor(Date.now() / DAY) * DAY + DAY / 2;
const iso = (ms: number) => new Date(ms).toISOString();
const TODAY = iso(T0).slice(0, 10);
const YESTERDAY = iso(T0 - DAY).slice(0, 10);
const MONTH = iso(T0).slice(0, 7);
const prefix = randomPrefix("usage");
const keys = new RedisKeys(prefix);

function turn(over: Partial<CountedTurn> = {}): CountedTurn {
  return {
    agentId: "main",
    sessionKey: "agent:main:a",
    channel: "telegram",
    model: "oa/m",
    costUsd: 0.1,
    input: 100,
    output: 20,
    ...over,
  };
}

const clients: Redis[] = [];
function client(): Redis {
  const c = newRedisClient();
  clients.push(c);
  return c;
}
afterEach(async () => {
  for (const c of clients.splice(0)) await c.quit();
  await dropPrefix(prefix);
});
afterAll(() => dropPrefix(prefix));

describeRedis("RedisUsageCounts", () => {
  it("totals survive a restart: a new instance on a new connection reads what the first counted", async () => {
    let clock = T0 - DAY;
    const now = () => clock;
    const a = new RedisUsageCounts(client(), keys, { now });
    a.add(turn({ agentId: "research", sessionKey: "agent:research:x", costUsd: 1 }));
    clock = T0;
    a.add(turn());
    a.add(turn());
    a.add(turn({ costUsd: 0.5, channel: "slack", model: undefined }));
    await a.close();

    const b = new RedisUsageCounts(client(), keys, { now });
    const day = await b.get("global", "day");
    expect(day.runs).toBe(3);
    expect(day.costUsd).toBeCloseTo(0.7, 10);
    expect(day.tokens).toEqual({ input: 300, output: 60 });
    expect((await b.get("agent:research", "month")).costUsd).toBeCloseTo(1, 10);
    expect((await b.get("session:agent:main:a", "day")).runs).toBe(3);
    expect((await b.get("model:oa/m", "day")).runs).toBe(2);
    expect(await b.get("agent:ghost", "day")).toEqual({
      costUsd: 0,
      tokens: { input: 0, output: 0 },
      runs: 0,
    });
    expect((await b.list("day", "channel")).map((r) => [r.key, r.runs])).toEqual([
      ["slack", 1],
      ["telegram", 2],
    ]);
    expect((await b.list("month", "agent")).map((r) => [r.key, r.runs])).toEqual([
      ["research", 1],
      ["main", 3],
    ]);
    const days = await b.daily("agent", 3);
    expect(days.map((r) => [r.day, r.key, r.runs])).toEqual([
      [YESTERDAY, "research", 1],
      [TODAY, "main", 3],
    ]);
    expect(days[1]?.costUsd).toBeCloseTo(0.7, 10);
  });

  it("two processes (a gateway and a worker) count into the same totals", async () => {
    const now = () => T0;
    const gateway = new RedisUsageCounts(client(), keys, { now });
    const worker = new RedisUsageCounts(client(), keys, { now });
    for (let i = 0; i < 10; i++) (i % 2 ? gateway : worker).add(turn({ sessionKey: `agent:main:s${i}` }));
    await Promise.all([gateway.close(), worker.close()]);
    for (const c of [gateway, worker]) {
      const g = await c.get("global", "day");
      expect(g.runs).toBe(10);
      expect(g.costUsd).toBeCloseTo(1, 10);
      expect((await c.list("day", "session")).length).toBe(10);
    }
  });

  it("spend that is no run of its own (a compaction's call) adds cost and tokens, not runs", async () => {
    const c = client();
    const counts = new RedisUsageCounts(c, keys, { now: () => T0 });
    counts.add(turn());
    counts.add(turn({ costUsd: 0.6, input: 500, output: 100, model: "oa/cheap", run: false }));
    await counts.close();
    const g = await counts.get("global", "day");
    expect(g.costUsd).toBeCloseTo(0.7, 10);
    expect(g).toMatchObject({ tokens: { input: 600, output: 120 }, runs: 1 });
    expect(await counts.get("model:oa/cheap", "month")).toMatchObject({ tokens: { input: 500 }, runs: 0 });
    expect((await counts.list("day", "channel")).map((r) => [r.key, r.runs, r.tokens.output])).toEqual([
      ["telegram", 1, 120],
    ]);
  });

  it("one hash per period and dimension under the store's hash tag, expiring after the retention", async () => {
    const c = client();
    const counts = new RedisUsageCounts(c, keys, { now: () => T0 });
    counts.add(turn({ channel: undefined }));
    await counts.close();
    const found = (await c.keys(`${keys.tag}:usage:*`)).sort();
    expect(found).toEqual(
      [
        `day:${TODAY}:global`,
        `day:${TODAY}:agent`,
        `day:${TODAY}:session`,
        `day:${TODAY}:model`,
        `month:${MONTH}:global`,
        `month:${MONTH}:agent`,
        `month:${MONTH}:session`,
        `month:${MONTH}:model`,
      ]
        .map((s) => `{${prefix}}:usage:${s}`)
        .sort(),
    );
    for (const k of found) {
      const parsed = keys.parse(k);
      expect(parsed?.type).toBe("usage");
    }
    expect(keys.parse(keys.usage(`day:${TODAY}`, "agent"))).toEqual({
      type: "usage",
      period: `day:${TODAY}`,
      dimension: "agent",
    });
    const expiry = async (k: string) => Number(await c.pexpiretime(k));
    const dayEnd = T0 + DAY / 2;
    const d = new Date(T0);
    const monthEnd = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    expect(await expiry(keys.usage(`day:${TODAY}`, "agent"))).toBe(dayEnd + 400 * DAY);
    expect(await expiry(keys.usage(`day:${TODAY}`, "session"))).toBe(dayEnd + 7 * DAY);
    expect(await expiry(keys.usage(`month:${MONTH}`, "global"))).toBe(monthEnd + 400 * DAY);
    expect(await expiry(keys.usage(`month:${MONTH}`, "session"))).toBe(monthEnd + 7 * DAY);
    expect(await c.hgetall(keys.usage(`day:${TODAY}`, "agent"))).toEqual({
      "main|c": "0.1",
      "main|i": "100",
      "main|o": "20",
      "main|r": "1",
    });
  });
});
