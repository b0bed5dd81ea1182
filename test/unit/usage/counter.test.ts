import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/log.js";
import { createFsStore, type FsStore } from "../../../src/store/fs/index.js";
import { USAGE_TOTALS_NS } from "../../../src/store/kv-namespaces.js";
import { type CountedTurn, UsageCounter } from "../../../src/usage/counter.js";
import { eventually, tempDir } from "../../helpers.js";

/** Usage counts of the embedded driver (API.md §8.4): in memory, persisted to the fs store's kv. */

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 11, 6, 12);

function turn(over: Partial<CountedTurn> = {}): CountedTurn {
  return {
    agentId: "main",
    sessionKey: "agent:main:a",
    channel: "telegram",
    model: "oa/m",
    costUsd: 0.25,
    input: 100,
    output: 20,
    ...over,
  };
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function openStore(dir: string): Promise<FsStore> {
  return createFsStore({ stateDir: dir, logger: silentLogger() });
}

describe("UsageCounter on the fs store", () => {
  it("totals, lists and days survive a restart (a new store and counter on the same state dir)", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    let clock = T0 - 2 * DAY;
    const now = () => clock;
    let store = await openStore(t.dir);
    let c = await UsageCounter.open({ kv: store.kv, now, flushMs: 60_000 });
    c.add(turn());
    clock = T0 - DAY;
    c.add(turn({ agentId: "research", sessionKey: "agent:research:x", costUsd: 1 }));
    clock = T0;
    c.add(turn());
    c.add(turn({ costUsd: 0.5, channel: "slack" }));
    await c.close();
    await store.close();

    store = await openStore(t.dir);
    c = await UsageCounter.open({ kv: store.kv, now, flushMs: 60_000 });
    cleanups.push(async () => {
      await c.close();
      await store.close();
    });
    expect(await c.get("global", "day")).toEqual({
      costUsd: 0.75,
      tokens: { input: 200, output: 40 },
      runs: 2,
    });
    expect((await c.get("global", "month")).runs).toBe(4);
    expect((await c.get("global", "month")).costUsd).toBeCloseTo(2);
    expect(await c.get("agent:research", "day")).toEqual({
      costUsd: 0,
      tokens: { input: 0, output: 0 },
      runs: 0,
    });
    expect((await c.list("day", "channel")).map((r) => [r.key, r.runs])).toEqual([
      ["slack", 1],
      ["telegram", 1],
    ]);
    expect((await c.list("month", "agent")).map((r) => [r.key, r.costUsd])).toEqual([
      ["main", 1], // same cost, more tokens first
      ["research", 1],
    ]);
    // spend per agent per day, oldest day first; a day without spend has no rows
    expect((await c.daily("agent", 4)).map((r) => [r.day, r.key, r.costUsd, r.runs])).toEqual([
      ["2026-12-04", "main", 0.25, 1],
      ["2026-12-05", "research", 1, 1],
      ["2026-12-06", "main", 0.75, 2],
    ]);
    expect((await c.daily("agent", 1)).map((r) => r.day)).toEqual(["2026-12-06"]);
    // counting goes on from the stored totals
    c.add(turn());
    expect((await c.get("agent:main", "day")).runs).toBe(3);
  });

  it("spend that is no run of its own (a compaction's call) adds cost and tokens, not runs", async () => {
    const c = new UsageCounter({ now: () => T0 });
    c.add(turn());
    c.add(turn({ costUsd: 0.5, input: 500, output: 100, model: "oa/cheap", run: false }));
    expect(await c.get("global", "day")).toEqual({
      costUsd: 0.75,
      tokens: { input: 600, output: 120 },
      runs: 1,
    });
    expect(await c.get("model:oa/cheap", "month")).toEqual({
      costUsd: 0.5,
      tokens: { input: 500, output: 100 },
      runs: 0,
    });
    expect((await c.list("day", "channel")).map((r) => [r.key, r.runs, r.tokens.output])).toEqual([
      ["telegram", 1, 120],
    ]);
  });

  it("a turn writes nothing itself: changed rows are written in one batch per flush interval", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const store = await openStore(t.dir);
    const c = await UsageCounter.open({ kv: store.kv, now: () => T0, flushMs: 50 });
    cleanups.push(async () => {
      await c.close();
      await store.close();
    });
    c.add(turn());
    c.add(turn({ sessionKey: "agent:main:b" }));
    // nothing in the kv until the timer fires
    expect(await store.kv.list(USAGE_TOTALS_NS)).toEqual([]);
    const rows = await eventually(
      async () => {
        const r = await store.kv.list<{ runs: number }>(USAGE_TOTALS_NS);
        return r.length > 0 ? r : null;
      },
      500,
      20,
    );
    // day + month × (global, agent, 2 sessions, channel, model)
    expect(rows.map((r) => r.key).sort()).toEqual(
      [
        "day:2026-12-06|global",
        "day:2026-12-06|agent:main",
        "day:2026-12-06|session:agent:main:a",
        "day:2026-12-06|session:agent:main:b",
        "day:2026-12-06|channel:telegram",
        "day:2026-12-06|model:oa/m",
        "month:2026-12|global",
        "month:2026-12|agent:main",
        "month:2026-12|session:agent:main:a",
        "month:2026-12|session:agent:main:b",
        "month:2026-12|channel:telegram",
        "month:2026-12|model:oa/m",
      ].sort(),
    );
    expect(rows.find((r) => r.key === "day:2026-12-06|global")?.value).toEqual({
      costUsd: 0.5,
      input: 200,
      output: 40,
      runs: 2,
    });
  });

  it("drops per-session rows 7 days and the others 400 days after their period, in memory and on disk", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    let clock = T0;
    const now = () => clock;
    let store = await openStore(t.dir);
    let c = await UsageCounter.open({ kv: store.kv, now, flushMs: 60_000 });
    c.add(turn());
    await c.close();
    // 8 days later: the day's session rows are gone, its agent rows stay
    clock = T0 + 8 * DAY;
    c = await UsageCounter.open({ kv: store.kv, now, flushMs: 60_000 });
    const keys = async () => (await store.kv.list(USAGE_TOTALS_NS)).map((r) => r.key).sort();
    await c.close();
    expect(await keys()).toEqual(
      [
        "day:2026-12-06|global",
        "day:2026-12-06|agent:main",
        "day:2026-12-06|channel:telegram",
        "day:2026-12-06|model:oa/m",
        "month:2026-12|global",
        "month:2026-12|agent:main",
        "month:2026-12|session:agent:main:a", // the month ends 2027-01-01: kept until 01-08
        "month:2026-12|channel:telegram",
        "month:2026-12|model:oa/m",
      ].sort(),
    );
    // a running counter prunes when a new day starts, and the deletions reach the disk
    c = await UsageCounter.open({ kv: store.kv, now, flushMs: 60_000 });
    expect((await c.daily("agent", 10)).map((r) => [r.day, r.key])).toEqual([["2026-12-06", "main"]]);
    clock = T0 + 401 * DAY;
    expect(await c.get("agent:main", "month")).toEqual({
      costUsd: 0,
      tokens: { input: 0, output: 0 },
      runs: 0,
    });
    await c.close();
    await store.close();
    store = await openStore(t.dir);
    cleanups.push(() => store.close());
    expect(await keys()).toEqual(
      [
        "month:2026-12|global",
        "month:2026-12|agent:main",
        "month:2026-12|channel:telegram",
        "month:2026-12|model:oa/m",
      ].sort(),
    );
  });

  it("unreadable stored rows are skipped, not fatal", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const store = await openStore(t.dir);
    cleanups.push(() => store.close());
    await store.kv.set(USAGE_TOTALS_NS, "day:2026-12-06|global", { costUsd: "x" });
    await store.kv.set(USAGE_TOTALS_NS, "nonsense", { costUsd: 1, input: 1, output: 1, runs: 1 });
    await store.kv.set(USAGE_TOTALS_NS, "day:2026-12-06|agent:main", {
      costUsd: 1,
      input: 2,
      output: 3,
      runs: 4,
    });
    const c = await UsageCounter.open({ kv: store.kv, now: () => T0, flushMs: 60_000 });
    cleanups.push(() => c.close());
    expect(await c.get("global", "day")).toEqual({ costUsd: 0, tokens: { input: 0, output: 0 }, runs: 0 });
    expect(await c.get("agent:main", "day")).toEqual({
      costUsd: 1,
      tokens: { input: 2, output: 3 },
      runs: 4,
    });
  });

  it("counting a turn stays far below 0.05 ms of CPU", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const store = await openStore(t.dir);
    const c = await UsageCounter.open({ kv: store.kv, now: Date.now, flushMs: 60_000 });
    cleanups.push(async () => {
      await c.close();
      await store.close();
    });
    const N = 20_000;
    for (let i = 0; i < 2000; i++) c.add(turn({ sessionKey: `agent:main:s${i % 500}` })); // warm-up
    const start = process.cpuUsage();
    for (let i = 0; i < N; i++) c.add(turn({ sessionKey: `agent:main:s${i % 500}` }));
    const used = process.cpuUsage(start);
    const perTurnMs = (used.user + used.system) / 1000 / N;
    console.log(`usage counter: ${(perTurnMs * 1000).toFixed(2)} µs CPU per counted turn`);
    expect(perTurnMs).toBeLessThan(0.05);
    expect((await c.get("global", "day")).runs).toBe(N + 2000);
    // one flush of what those turns changed: 1,008 rows (500 sessions and 4 other scopes, day and month)
    const f = process.cpuUsage();
    await c.flush();
    const flushed = process.cpuUsage(f);
    console.log(
      `usage counter: flush of 1,008 rows ${((flushed.user + flushed.system) / 1000).toFixed(1)} ms CPU`,
    );
    expect((await store.kv.list(USAGE_TOTALS_NS)).length).toBe(1008);
  });
});
