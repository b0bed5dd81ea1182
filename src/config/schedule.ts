import { createRequire } from "node:module";

/**
 * Schedules of cron jobs (API.md §7): a cron expression with an IANA time zone, `every` an
 * interval, or `at` one instant. Pure functions over epoch milliseconds; the same cron engine
 * (cron-parser) BullMQ uses, so local previews match what the bullmq driver fires.
 */

// cron-parser (+ luxon) costs ~9 MB of RSS: loaded on first use, so a gateway without cron
// expressions never pays for it (the idle-memory budget).
const requireCjs = createRequire(import.meta.url);
let parser: typeof import("cron-parser")["CronExpressionParser"] | null = null;
function cronParser(): typeof import("cron-parser")["CronExpressionParser"] {
  parser ??= (requireCjs("cron-parser") as typeof import("cron-parser")).CronExpressionParser;
  return parser;
}

export type Schedule = { cron: string; tz?: string | undefined } | { every: string } | { at: string };

/** Consecutive-failure backoff: 30 s, 1 min, 5 min, 15 min, then 60 min. */
export const BACKOFF_MS: readonly number[] = [30_000, 60_000, 300_000, 900_000, 3_600_000];

/** How long to hold off after `failures` consecutive failures (0 → none). */
export function backoffMs(failures: number): number {
  if (failures <= 0) return 0;
  return BACKOFF_MS[Math.min(failures, BACKOFF_MS.length) - 1] ?? 3_600_000;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_RE = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;

/** `"30m"`, `"1h30m"`, `"24h"`, `"10s"`, `"500ms"`, `"1.5h"` → milliseconds; null when malformed. */
export function parseDurationMs(text: string): number | null {
  const s = text.trim().toLowerCase();
  if (!DURATION_RE.test(s)) return null;
  let total = 0;
  for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g))
    total += Number(m[1]) * (UNIT_MS[m[2] ?? ""] ?? 0);
  return Math.round(total);
}

/** Whether `tz` is an IANA zone this runtime knows. */
export function isValidTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const HAS_ZONE_RE = /(?:[zZ]|[+-]\d{2}:?\d{2})$/;

/** An ISO 8601 instant; without a zone it is read as UTC. null when malformed. */
export function parseInstant(text: string): number | null {
  const s = text.trim();
  if (!/^\d{4}-\d{2}-\d{2}/.test(s)) return null;
  const withZone = HAS_ZONE_RE.test(s) || !s.includes("T") ? s : `${s}Z`;
  const ms = Date.parse(withZone);
  return Number.isFinite(ms) ? ms : null;
}

export const MIN_EVERY_MS = 1000;

/**
 * What is wrong with a schedule, as `[field, message]` pairs (empty when valid). Fields are
 * relative to the schedule (`cron`, `tz`, `every`, `at`).
 */
export function scheduleProblems(s: Record<string, unknown>): Array<[string, string]> {
  const kinds = ["cron", "every", "at"].filter((k) => s[k] !== undefined);
  if (kinds.length !== 1) return [["", 'must have exactly one of "cron", "every" or "at"']];
  if (s.tz !== undefined && s.cron === undefined) return [["tz", 'only applies to a "cron" schedule']];
  if (typeof s.cron === "string") {
    const out: Array<[string, string]> = [];
    if (typeof s.tz === "string" && !isValidTimeZone(s.tz))
      out.push(["tz", `unknown IANA time zone "${s.tz}" (e.g. "Europe/Berlin", "UTC")`]);
    try {
      cronParser().parse(s.cron, { tz: "UTC" });
      if (s.cron.trim().split(/\s+/).length < 5 && !s.cron.trim().startsWith("@"))
        throw new Error("expected 5 fields (minute hour day-of-month month day-of-week)");
    } catch (err) {
      out.push(["cron", `invalid cron expression "${s.cron}": ${(err as Error).message}`]);
    }
    return out;
  }
  if (typeof s.every === "string") {
    const ms = parseDurationMs(s.every);
    if (ms === null) return [["every", `"${s.every}" is not a duration like "30s", "10m", "1h" or "1d"`]];
    if (ms < MIN_EVERY_MS) return [["every", "must be at least 1s"]];
    return [];
  }
  if (typeof s.at === "string") {
    return parseInstant(s.at) === null
      ? [["at", `"${s.at}" is not an ISO 8601 time like "2026-12-24T18:00:00Z"`]]
      : [];
  }
  return [[kinds[0] ?? "", "must be a string"]];
}

/**
 * The first tick strictly after `afterMs`, or null when there is none (an `at` that has passed).
 * `every` ticks align to multiples of the interval since the epoch, as BullMQ's do.
 * A cron expression without `tz` runs in UTC (never the host's zone).
 */
export function nextTickAfter(s: Schedule, afterMs: number): number | null {
  if ("cron" in s) {
    const it = cronParser().parse(s.cron, { currentDate: new Date(afterMs), tz: s.tz ?? "UTC" });
    // cron-parser's resolution is one second; skip a tick equal to afterMs.
    for (let i = 0; i < 4; i++) {
      const t = it.next().getTime();
      if (t > afterMs) return t;
    }
    return null;
  }
  if ("every" in s) {
    const every = parseDurationMs(s.every);
    if (every === null || every <= 0) return null;
    return Math.floor(afterMs / every) * every + every;
  }
  const at = parseInstant(s.at);
  return at !== null && at > afterMs ? at : null;
}

/** The first tick of a job scheduled at `fromMs`: strictly after it (an `at` in the past is still its own tick). */
export function firstTick(s: Schedule, fromMs: number): number | null {
  if ("at" in s) return parseInstant(s.at);
  return nextTickAfter(s, fromMs);
}

/** The interval of an `every` schedule in ms (null for other kinds). */
export function everyMs(s: Schedule): number | null {
  return "every" in s ? parseDurationMs(s.every) : null;
}

/** A stable signature: a changed schedule is recomputed, an unchanged one keeps its journaled tick. */
export function scheduleSignature(s: Schedule): string {
  if ("cron" in s) return `cron|${s.cron.trim()}|${s.tz ?? "UTC"}`;
  if ("every" in s) return `every|${parseDurationMs(s.every)}`;
  return `at|${parseInstant(s.at)}`;
}
