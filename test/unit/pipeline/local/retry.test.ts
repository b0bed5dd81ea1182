import { describe, expect, it } from "vitest";
import { decideRetry } from "../../../../src/pipeline/local/retry.js";
import { RetryLaterError, UnrecoverableJobError } from "../../../../src/pipeline/types.js";

const policy = { maxAttempts: 3, baseMs: 100 };

describe("decideRetry", () => {
  it.each([
    // [error, failed before, expected]
    [new Error("x"), 0, { action: "retry", delayMs: 100, attempts: 1, reason: "failed" }],
    [new Error("x"), 1, { action: "retry", delayMs: 200, attempts: 2, reason: "failed" }],
    [new Error("x"), 2, { action: "drop", attempts: 3, reason: "attempts-exhausted" }],
    ["a string", 0, { action: "retry", delayMs: 100, attempts: 1, reason: "failed" }],
    [new UnrecoverableJobError("bad input"), 0, { action: "drop", attempts: 1, reason: "unrecoverable" }],
    [
      new RetryLaterError("429", 1500),
      2,
      { action: "retry", delayMs: 1500, attempts: 2, reason: "retry-later" },
    ],
    [new RetryLaterError("odd", -5), 0, { action: "retry", delayMs: 0, attempts: 0, reason: "retry-later" }],
  ] as const)("%s after %i failures", (err, before, expected) => {
    expect(decideRetry(err, before, policy)).toEqual(expected);
  });

  it("drops at once when only one attempt is allowed", () => {
    expect(decideRetry(new Error("x"), 0, { maxAttempts: 1, baseMs: 100 }).action).toBe("drop");
  });
});
