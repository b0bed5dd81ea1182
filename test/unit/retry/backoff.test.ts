import { describe, expect, it } from "vitest";
import { backoffDelayMs, parseRetryAfterMs } from "../../../src/retry/index.js";

describe("backoffDelayMs", () => {
  it.each<[string, number, { baseDelayMs: number; maxDelayMs: number; jitter?: number }, number, number]>([
    // [row, retry, policy, random(), expected ms]
    ["first retry is the base", 0, { baseDelayMs: 500, maxDelayMs: 8000 }, 0.9, 500],
    ["doubles per retry", 1, { baseDelayMs: 500, maxDelayMs: 8000 }, 0.9, 1000],
    ["third retry", 2, { baseDelayMs: 500, maxDelayMs: 8000 }, 0.9, 2000],
    ["capped", 4, { baseDelayMs: 500, maxDelayMs: 8000 }, 0.9, 8000],
    ["stays capped", 10, { baseDelayMs: 500, maxDelayMs: 8000 }, 0.9, 8000],
    ["no cap", 3, { baseDelayMs: 100, maxDelayMs: Number.POSITIVE_INFINITY }, 0.9, 800],
    ["jitter 0 drawn low", 1, { baseDelayMs: 500, maxDelayMs: 8000, jitter: 0.25 }, 0, 1000],
    ["jitter shortens by at most a quarter", 1, { baseDelayMs: 500, maxDelayMs: 8000, jitter: 0.25 }, 1, 750],
    ["jitter on the cap", 9, { baseDelayMs: 500, maxDelayMs: 8000, jitter: 0.25 }, 0.5, 7000],
    ["jitter rounds to whole ms", 0, { baseDelayMs: 3, maxDelayMs: 8000, jitter: 0.25 }, 1, 2],
  ])("%s", (_row, retry, policy, r, ms) => {
    expect(backoffDelayMs(retry, policy, () => r)).toBe(ms);
  });
});

describe("parseRetryAfterMs", () => {
  const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
  it.each<[Record<string, string>, number | undefined]>([
    [{}, undefined],
    [{ "retry-after": "2" }, 2000],
    [{ "retry-after": "0.25" }, 250],
    [{ "retry-after": "-3" }, 0],
    [{ "retry-after-ms": "120", "retry-after": "9" }, 120],
    [{ "retry-after-ms": "bad", "retry-after": "9" }, 9000],
    [{ "retry-after": "Wed, 21 Oct 2015 07:28:10 GMT" }, 10_000],
    [{ "retry-after": "Wed, 21 Oct 2015 07:27:00 GMT" }, 0],
    [{ "retry-after": "soon" }, undefined],
    [{ "retry-after": " " }, undefined],
  ])("parses %j as %s ms", (h, ms) => {
    expect(parseRetryAfterMs(new Headers(h), now)).toBe(ms);
  });

  it("reads nothing without headers", () => {
    expect(parseRetryAfterMs(undefined)).toBeUndefined();
  });
});
