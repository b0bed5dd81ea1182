import { describe, expect, it } from "vitest";
import { retryDecisionFor } from "../../../../src/agent/providers/failure.js";
import { AttemptTimeoutError, withRetry, withTimeout } from "../../../../src/agent/providers/retry.js";

const policy = { maxRetries: 3, baseDelayMs: 500, maxDelayMs: 8000, maxRetryAfterMs: 60_000 };

describe("provider retry policy", () => {
  it.each<[Parameters<typeof retryDecisionFor>[0], boolean]>([
    [{ kind: "status", status: 429, message: "" }, true],
    [{ kind: "status", status: 500, message: "" }, true],
    [{ kind: "status", status: 529, message: "" }, true],
    [{ kind: "status", status: 408, message: "" }, true],
    [{ kind: "status", status: 400, message: "" }, false],
    [{ kind: "status", status: 401, message: "" }, false],
    [{ kind: "status", status: 404, message: "" }, false],
    [{ kind: "connection", message: "ECONNREFUSED" }, true],
    [{ kind: "timeout" }, true],
    [undefined, false],
  ])("%j retries: %s", (failure, retry) => {
    expect(retryDecisionFor(failure).retry).toBe(retry);
  });

  it("retries until success, waiting the server's delay or the backoff", async () => {
    const delays: number[] = [];
    let calls = 0;
    const out = await withRetry(
      async () => {
        calls++;
        if (calls < 3) throw new Error(`fail ${calls}`);
        return "ok";
      },
      {
        policy,
        random: () => 0,
        sleep: async (ms) => void delays.push(ms),
        classify: (err) =>
          (err as Error).message === "fail 1" ? { retry: true, retryAfterMs: 42 } : { retry: true },
      },
    );
    expect(out).toBe("ok");
    expect(delays).toEqual([42, 1000]);
  });

  it("stops at maxRetries, on a non-retryable failure, and on an over-long retry-after", async () => {
    const run = (classify: () => { retry: boolean; retryAfterMs?: number }) => {
      let calls = 0;
      const p = withRetry(
        async () => {
          calls++;
          throw new Error("nope");
        },
        { policy, classify, sleep: async () => {} },
      );
      return p.catch(() => calls);
    };
    expect(await run(() => ({ retry: true }))).toBe(4);
    expect(await run(() => ({ retry: false }))).toBe(1);
    expect(await run(() => ({ retry: true, retryAfterMs: 61_000 }))).toBe(1);
  });
});

describe("attempt timeout", () => {
  it("withTimeout aborts the attempt's own signal and reports a timeout", async () => {
    let seen: AbortSignal | undefined;
    const err = await withTimeout(20, undefined, (signal) => {
      seen = signal;
      return new Promise((_r, reject) =>
        signal.addEventListener("abort", () => reject(new Error("aborted"))),
      );
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttemptTimeoutError);
    expect(seen?.aborted).toBe(true);
  });

  it("withTimeout passes the caller's abort reason through", async () => {
    const c = new AbortController();
    const reason = new Error("caller");
    const p = withTimeout(
      60_000,
      c.signal,
      (signal) => new Promise((_r, reject) => signal.addEventListener("abort", () => reject(new Error("x")))),
    );
    c.abort(reason);
    await expect(p).rejects.toBe(reason);
  });
});
