import { describe, expect, it } from "vitest";
import {
  backoffMs,
  firstTick,
  nextTickAfter,
  parseDurationMs,
  parseInstant,
  scheduleProblems,
} from "../../../src/config/schedule.js";

const z = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

describe("cron schedules", () => {
  it("a cron expression runs in its IANA time zone (UTC when none is given)", () => {
    const after = z("2026-06-01T00:00:00Z");
    expect(iso(nextTickAfter({ cron: "0 7 * * *", tz: "Europe/Berlin" }, after))).toBe(
      "2026-06-01T05:00:00.000Z",
    );
    expect(iso(nextTickAfter({ cron: "0 7 * * *", tz: "America/New_York" }, after))).toBe(
      "2026-06-01T11:00:00.000Z",
    );
    expect(iso(nextTickAfter({ cron: "0 7 * * *" }, after))).toBe("2026-06-01T07:00:00.000Z");
  });

  it("follows the wall clock across a DST change (Berlin, spring forward and fall back)", () => {
    const s = { cron: "0 7 * * *", tz: "Europe/Berlin" };
    // 07:00 CET (+01:00) on Saturday, 07:00 CEST (+02:00) on Sunday 2026-03-29.
    const sat = nextTickAfter(s, z("2026-03-28T00:00:00Z"));
    expect(iso(sat)).toBe("2026-03-28T06:00:00.000Z");
    expect(iso(nextTickAfter(s, sat ?? 0))).toBe("2026-03-29T05:00:00.000Z");
    // A time inside the skipped hour runs shifted into the next hour, not skipped.
    expect(iso(nextTickAfter({ cron: "30 2 * * *", tz: "Europe/Berlin" }, z("2026-03-28T12:00:00Z")))).toBe(
      "2026-03-29T01:30:00.000Z",
    );
    // Fall back (2026-10-25): a time in the repeated hour fires once.
    const fb = { cron: "30 2 * * *", tz: "Europe/Berlin" };
    const first = nextTickAfter(fb, z("2026-10-24T12:00:00Z"));
    expect(iso(first)).toBe("2026-10-25T00:30:00.000Z");
    expect(iso(nextTickAfter(fb, first ?? 0))).toBe("2026-10-26T01:30:00.000Z");
  });

  it("every aligns to multiples of the interval; at is one instant", () => {
    expect(nextTickAfter({ every: "10m" }, z("2026-01-01T00:03:00Z"))).toBe(z("2026-01-01T00:10:00Z"));
    expect(nextTickAfter({ every: "10m" }, z("2026-01-01T00:10:00Z"))).toBe(z("2026-01-01T00:20:00Z"));
    expect(firstTick({ every: "10m" }, z("2026-01-01T00:10:00Z"))).toBe(z("2026-01-01T00:20:00Z"));
    const at = { at: "2026-12-24T18:00:00Z" };
    expect(firstTick(at, z("2026-12-25T00:00:00Z"))).toBe(z("2026-12-24T18:00:00Z"));
    expect(nextTickAfter(at, z("2026-12-24T17:00:00Z"))).toBe(z("2026-12-24T18:00:00Z"));
    expect(nextTickAfter(at, z("2026-12-24T18:00:00Z"))).toBeNull();
    expect(parseInstant("2026-12-24T18:00:00")).toBe(z("2026-12-24T18:00:00Z"));
    expect(parseInstant("2026-12-24T19:00:00+01:00")).toBe(z("2026-12-24T18:00:00Z"));
  });

  it("durations and the backoff table", () => {
    expect(parseDurationMs("30m")).toBe(1_800_000);
    expect(parseDurationMs("1h30m")).toBe(5_400_000);
    expect(parseDurationMs("24h")).toBe(86_400_000);
    expect(parseDurationMs("0.05m")).toBe(3000);
    expect(parseDurationMs("soon")).toBeNull();
    expect([1, 2, 3, 4, 5, 6, 20].map(backoffMs)).toEqual([
      30_000, 60_000, 300_000, 900_000, 3_600_000, 3_600_000, 3_600_000,
    ]);
    expect(backoffMs(0)).toBe(0);
  });

  it("names what is wrong with a schedule", () => {
    expect(scheduleProblems({ cron: "0 7 * * *", tz: "Europe/Berlin" })).toEqual([]);
    expect(scheduleProblems({ cron: "61 * * * *" })[0]?.[0]).toBe("cron");
    expect(scheduleProblems({ cron: "* *" })[0]?.[0]).toBe("cron");
    expect(scheduleProblems({ cron: "0 7 * * *", tz: "Mars/Olympus" })[0]?.[0]).toBe("tz");
    expect(scheduleProblems({ every: "0.5s" })[0]).toEqual(["every", "must be at least 1s"]);
    expect(scheduleProblems({ every: "often" })[0]?.[0]).toBe("every");
    expect(scheduleProblems({ at: "tomorrow" })[0]?.[0]).toBe("at");
    expect(scheduleProblems({ cron: "0 7 * * *", every: "1h" })[0]?.[0]).toBe("");
    expect(scheduleProblems({ every: "1h", tz: "UTC" })[0]?.[0]).toBe("tz");
  });
});
