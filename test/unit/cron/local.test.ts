import { describe, expect, it } from "vitest";
import { type Clock, LocalCronDriver } from "../../../src/cron/local.js";
import { silentLogger } from "../../../src/log.js";
import type { CronJob, Tick } from "../../../src/services/cron.js";
import { MemoryKeyValueStore } from "../../helpers/memory-store.js";

/** The embedded scheduler on a fake clock: timers fire only when the test advances time. */

class FakeClock implements Clock {
  #timers: Array<{ at: number; fn: () => void; live: boolean }> = [];
  constructor(public t: number) {}
  now(): number {
    return this.t;
  }
  setTimer(fn: () => void, ms: number): () => void {
    const timer = { at: this.t + ms, fn, live: true };
    this.#timers.push(timer);
    return () => {
      timer.live = false;
    };
  }
  /** Moves time to `target`, firing due timers in order and letting the driver settle after each. */
  async advanceTo(target: number, settle: () => Promise<void>): Promise<void> {
    for (let i = 0; i < 10_000; i++) {
      this.#timers = this.#timers.filter((x) => x.live);
      const next = this.#timers.sort((a, b) => a.at - b.at)[0];
      if (!next || next.at > target) break;
      this.t = Math.max(this.t, next.at);
      next.live = false;
      next.fn();
      await settle();
    }
    this.t = target;
    await settle();
  }
}

const T0 = Date.parse("2026-03-27T12:00:00Z");
const job = (over: Partial<CronJob> & Pick<CronJob, "id" | "schedule">): CronJob => ({
  agentId: "main",
  enabled: true,
  message: "tick",
  session: "persistent",
  delivery: { mode: "none" },
  catchUp: "once",
  ...over,
});

function setup(kv = new MemoryKeyValueStore(), clock = new FakeClock(T0)) {
  const ticks: Tick[] = [];
  const driver = new LocalCronDriver({ kv, logger: silentLogger(), clock });
  const onTick = async (t: Tick) => {
    ticks.push(t);
  };
  const advanceTo = (ms: number) => clock.advanceTo(ms, () => driver.settled());
  return { kv, clock, driver, ticks, onTick, advanceTo };
}

const iso = (ticks: Tick[]) => ticks.map((t) => new Date(t.tickAt).toISOString());

describe("local cron driver (fake clock)", () => {
  it("fires a time-zone cron job at wall-clock 07:00 across the DST change", async () => {
    const s = setup();
    await s.driver.start(
      [job({ id: "daily", schedule: { cron: "0 7 * * *", tz: "Europe/Berlin" } })],
      s.onTick,
    );
    expect(await s.driver.nextRunAt("daily")).toBe(Date.parse("2026-03-28T06:00:00Z"));
    await s.advanceTo(Date.parse("2026-03-30T12:00:00Z"));
    expect(iso(s.ticks)).toEqual([
      "2026-03-28T06:00:00.000Z", // CET
      "2026-03-29T05:00:00.000Z", // CEST
      "2026-03-30T05:00:00.000Z",
    ]);
    expect(s.ticks.every((t) => !t.late)).toBe(true);
    await s.driver.stop();
  });

  it("every fires on interval multiples; at fires once", async () => {
    const s = setup();
    await s.driver.start(
      [
        job({ id: "ten", schedule: { every: "10m" } }),
        job({ id: "once", schedule: { at: new Date(T0 + 25 * 60_000).toISOString() } }),
      ],
      s.onTick,
    );
    await s.advanceTo(T0 + 60 * 60_000);
    expect(s.ticks.filter((t) => t.jobId === "ten")).toHaveLength(6);
    expect(s.ticks.filter((t) => t.jobId === "ten").every((t) => t.tickAt % 600_000 === 0)).toBe(true);
    expect(s.ticks.filter((t) => t.jobId === "once").map((t) => t.tickAt)).toEqual([T0 + 25 * 60_000]);
    expect(await s.driver.nextRunAt("once")).toBeNull();
    await s.driver.stop();
  });

  it("a restart neither loses nor doubles a tick (next tick journaled in the kv)", async () => {
    const a = setup();
    const jobs = [job({ id: "hourly", schedule: { cron: "0 * * * *" } })];
    await a.driver.start(jobs, a.onTick);
    await a.advanceTo(T0 + 90 * 60_000); // 13:00 fired
    await a.driver.stop();
    expect(iso(a.ticks)).toEqual(["2026-03-27T13:00:00.000Z"]);
    // Restart before 14:00 on the same kv: 13:00 is not fired again, 14:00 is fired once.
    const b = setup(a.kv, new FakeClock(T0 + 100 * 60_000));
    await b.driver.start(jobs, b.onTick);
    await b.advanceTo(T0 + 130 * 60_000);
    expect(iso(b.ticks)).toEqual(["2026-03-27T14:00:00.000Z"]);
    expect(b.ticks[0]?.late).toBe(false);
    await b.driver.stop();
  });

  it("a crash after the turn was accepted but before the next tick was journaled re-fires the SAME tick", async () => {
    const a = setup();
    const jobs = [job({ id: "hourly", schedule: { cron: "0 * * * *" } })];
    let crash = true;
    // The handler accepts the tick, then the process "dies" before journaling: stop inside the handler.
    await a.driver.start(jobs, async (t) => {
      a.ticks.push(t);
      if (crash) {
        crash = false;
        throw new Error("process died");
      }
    });
    await a.advanceTo(T0 + 60 * 60_000); // 13:00: accepted, then the process dies
    await a.driver.stop();
    const b = setup(a.kv, new FakeClock(T0 + 62 * 60_000));
    await b.driver.start(jobs, b.onTick);
    await b.advanceTo(T0 + 63 * 60_000);
    // Same tickAt (so the same run id upstream): redelivered, not lost, and only once more.
    expect(iso(a.ticks)).toEqual(["2026-03-27T13:00:00.000Z"]);
    expect(iso(b.ticks)).toEqual(["2026-03-27T13:00:00.000Z"]);
    await b.driver.stop();
  });

  it("ticks missed while down are collapsed into one late tick at start", async () => {
    const a = setup();
    const jobs = [job({ id: "hourly", schedule: { cron: "0 * * * *" } })];
    await a.driver.start(jobs, a.onTick);
    await a.advanceTo(T0 + 61 * 60_000);
    await a.driver.stop();
    // Down from 13:01 to 17:30: 14:00, 15:00, 16:00 and 17:00 were missed.
    const b = setup(a.kv, new FakeClock(T0 + 5.5 * 3_600_000));
    await b.driver.start(jobs, b.onTick);
    await b.driver.settled();
    expect(b.ticks).toHaveLength(1);
    expect(b.ticks[0]).toMatchObject({
      jobId: "hourly",
      late: true,
      tickAt: Date.parse("2026-03-27T14:00:00Z"),
    });
    await b.advanceTo(T0 + 6.25 * 3_600_000);
    expect(iso(b.ticks).slice(1)).toEqual(["2026-03-27T18:00:00.000Z"]);
    await b.driver.stop();
  });

  it("a changed schedule is recomputed; a removed or disabled job stops; retries fire once", async () => {
    const s = setup();
    await s.driver.start([job({ id: "j", schedule: { every: "1h" } })], s.onTick);
    await s.driver.put(job({ id: "j", schedule: { every: "30m" } }));
    expect(await s.driver.nextRunAt("j")).toBe(Date.parse("2026-03-27T12:30:00Z"));
    await s.driver.put(job({ id: "j", schedule: { every: "30m" }, enabled: false }));
    expect(await s.driver.nextRunAt("j")).toBeNull();
    await s.driver.retryAt("j", T0 + 5 * 60_000);
    await s.driver.retryAt("j", T0 + 5 * 60_000);
    await s.advanceTo(T0 + 3_600_000);
    expect(s.ticks).toEqual([{ jobId: "j", tickAt: T0 + 5 * 60_000, late: false, retry: true }]);
    await s.driver.stop();
  });
});
