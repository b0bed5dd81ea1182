import { afterEach, describe, expect, it, vi } from "vitest";
import { retryDecisionFor } from "../../../../src/agent/providers/failure.js";
import {
  AttemptSignal,
  AttemptTimeoutError,
  withRetry,
  withTimeout,
} from "../../../../src/agent/providers/retry.js";

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
    let seen: AttemptSignal | undefined;
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

  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  /** An attempt that settles only when told to, or fails when its signal aborts. */
  function pending(signal: AttemptSignal) {
    let settle!: (v: string) => void;
    const done = new Promise<string>((resolve, reject) => {
      settle = resolve;
      signal.addEventListener("abort", () => reject(new Error("aborted")));
    });
    return { done, settle: (v: string) => settle(v) };
  }

  it("each attempt times out at its own deadline, however many share one timer", async () => {
    vi.useFakeTimers();
    const signals: AttemptSignal[] = [];
    const settles: Array<(v: string) => void> = [];
    const start = () =>
      withTimeout(100, undefined, (s) => {
        signals.push(s);
        const p = pending(s);
        settles.push(p.settle);
        return p.done;
      }).catch((e: unknown) => e);
    const a = start(); // deadline 100
    await vi.advanceTimersByTimeAsync(30);
    const b = start(); // deadline 130
    await vi.advanceTimersByTimeAsync(30);
    const c = start(); // deadline 160
    settles[0]!("a"); // a finishes in time: it must never see an abort
    await vi.advanceTimersByTimeAsync(50); // t = 110
    expect(await a).toBe("a");
    expect(signals[0]!.aborted).toBe(false);
    expect(signals[1]!.aborted).toBe(false); // b's deadline (130) has not come
    await vi.advanceTimersByTimeAsync(25); // t = 135
    expect(await b).toBeInstanceOf(AttemptTimeoutError);
    expect(signals[2]!.aborted).toBe(false);
    settles[2]!("c");
    expect(await c).toBe("c");
    await vi.advanceTimersByTimeAsync(100);
    expect(signals[2]!.aborted).toBe(false);
  });

  it("sequential attempts arm no timer of their own", async () => {
    const spy = vi.spyOn(globalThis, "setTimeout");
    for (let i = 0; i < 50; i++) expect(await withTimeout(777_000, undefined, async () => i)).toBe(i);
    // one timer (for the first attempt's deadline) serves all of them; a timer each armed 50
    expect(spy.mock.calls.filter((c) => c[1] !== undefined && c[1] > 700_000).length).toBeLessThanOrEqual(1);
  });

  it("an AttemptSignal runs each listener once, in order, not after removal or after the abort", () => {
    const s = new AttemptSignal();
    const seen: string[] = [];
    const removed = () => seen.push("removed");
    s.addEventListener("abort", () => seen.push("one"));
    s.addEventListener("abort", removed);
    s.addEventListener("abort", () => seen.push("two"));
    s.removeEventListener("abort", removed);
    const reason = new Error("why");
    s.abort(reason);
    s.abort(new Error("again"));
    s.addEventListener("abort", () => seen.push("late"));
    expect(seen).toEqual(["one", "two"]);
    expect(s.aborted).toBe(true);
    expect(s.reason).toBe(reason);
  });

  it("toAbortSignal gives SDKs a standard signal that aborts with the same reason", () => {
    const s = new AttemptSignal();
    const real = s.toAbortSignal();
    expect(real).toBeInstanceOf(AbortSignal);
    expect(real.aborted).toBe(false);
    const reason = new AttemptTimeoutError(5);
    s.abort(reason);
    expect(real.aborted).toBe(true);
    expect(real.reason).toBe(reason);
    const after = new AttemptSignal();
    after.abort(reason);
    expect(after.toAbortSignal().reason).toBe(reason);
  });
});
