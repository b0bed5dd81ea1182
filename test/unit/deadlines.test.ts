import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_TIMER_MS, setDeadline } from "../../src/deadlines.js";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("setDeadline (shared deadline timers)", () => {
  it("runs each callback at its own time, skips cancelled ones, and keeps the order of one length", async () => {
    vi.useFakeTimers();
    const fired: string[] = [];
    const at = (name: string) => () => fired.push(`${name}@${Date.now() - start}`);
    const start = Date.now();
    setDeadline(100, at("a"));
    await vi.advanceTimersByTimeAsync(30);
    const b = setDeadline(100, at("b"));
    setDeadline(40, at("short"));
    await vi.advanceTimersByTimeAsync(30);
    setDeadline(100, at("c"));
    b.cancel();
    await vi.advanceTimersByTimeAsync(200);
    expect(fired).toEqual(["short@70", "a@100", "c@160"]);
  });

  it("a throwing callback does not stop the others due at the same time", async () => {
    vi.useFakeTimers();
    const errors: unknown[] = [];
    const onError = (err: unknown) => errors.push(err);
    process.on("uncaughtException", onError);
    try {
      const fired: number[] = [];
      setDeadline(50, () => fired.push(1));
      setDeadline(50, () => {
        throw new Error("boom");
      });
      setDeadline(50, () => fired.push(3));
      await vi.advanceTimersByTimeAsync(60).catch(onError);
      expect(fired).toEqual([1, 3]);
      expect(errors.map((e) => (e as Error).message)).toEqual(["boom"]);
    } finally {
      process.off("uncaughtException", onError);
    }
  });

  it("arms one Node timer for many timeouts of one length, and works past 64 lengths", async () => {
    const spy = vi.spyOn(globalThis, "setTimeout");
    const many = Array.from({ length: 200 }, () => setDeadline(654_321, () => {}));
    expect(spy.mock.calls.filter((c) => c[1] !== undefined && c[1] > 600_000).length).toBe(1);
    for (const d of many) d.cancel();
    const fired: number[] = [];
    for (let i = 0; i < 80; i++) setDeadline(i, () => fired.push(i));
    await new Promise((r) => setTimeout(r, 150));
    expect(fired.sort((x, y) => x - y)).toEqual(Array.from({ length: 80 }, (_, i) => i));
  });
});

describe("setDeadline beyond one Node timer", () => {
  it("arms one timer for it and neither fires early nor spins (past its longest delay Node fires after 1 ms)", async () => {
    const fired: string[] = [];
    const spy = vi.spyOn(globalThis, "setTimeout");
    const far = setDeadline(MAX_TIMER_MS + 5_000, () => fired.push("far"));
    spy.mockRestore();
    const armed = vi.spyOn(globalThis, "setTimeout");
    await new Promise((r) => setTimeout(r, 50));
    expect(fired).toEqual([]);
    // the only timer set in those 50 ms is the test's own: none re-armed every millisecond
    expect(armed.mock.calls.filter((c) => c[1] !== 50)).toEqual([]);
    far.cancel();
  });

  it("waits for such a deadline in steps and fires it once, on time", async () => {
    vi.useFakeTimers();
    const fired: number[] = [];
    const start = Date.now();
    setDeadline(MAX_TIMER_MS + 7_000, () => fired.push(Date.now() - start));
    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS + 6_000);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(fired).toEqual([MAX_TIMER_MS + 7_000]);
  });
});
