import { describe, expect, it } from "vitest";
import { abortableSleep, retryLoop } from "../../../src/retry/index.js";

/** Runs a loop whose attempt n fails with outcomes[n] (an Error) or succeeds ("ok"). */
async function drive(
  outcomes: readonly (string | Error)[],
  delayFor: (err: unknown, attempt: number) => number | undefined,
): Promise<{ result: string; calls: number; waits: number[]; retries: number[] }> {
  let calls = 0;
  const waits: number[] = [];
  const retries: number[] = [];
  const result = await retryLoop(
    async (attempt) => {
      calls++;
      const o = outcomes[attempt] ?? new Error("ran past the table");
      if (o instanceof Error) throw o;
      return o;
    },
    {
      delayFor,
      sleep: async (ms) => void waits.push(ms),
      onRetry: ({ retry }) => void retries.push(retry),
    },
  ).catch((e: unknown) => `threw ${(e as Error).message}`);
  return { result, calls, waits, retries };
}

const fail = (m: string) => new Error(m);
const listed =
  (list: number[]) =>
  (_e: unknown, attempt: number): number | undefined =>
    list[attempt];

describe("retryLoop", () => {
  it.each<
    [string, (string | Error)[], (e: unknown, a: number) => number | undefined, string, number, number[]]
  >([
    // [row, outcomes, delayFor, result, calls, waits]
    ["first try succeeds", ["ok"], listed([5]), "ok", 1, []],
    ["second try succeeds", [fail("a"), "ok"], listed([5]), "ok", 2, [5]],
    ["list used up: last failure rethrown", [fail("a"), fail("b"), "ok"], listed([5]), "threw b", 2, [5]],
    ["empty list: no retry", [fail("a"), "ok"], listed([]), "threw a", 1, []],
    [
      "delays follow the list",
      [fail("a"), fail("b"), fail("c"), "ok"],
      listed([1, 2, 3]),
      "ok",
      4,
      [1, 2, 3],
    ],
    ["zero delay still retries", [fail("a"), "ok"], listed([0]), "ok", 2, [0]],
    [
      "gives up on a failure it does not retry",
      [fail("retry"), fail("fatal"), "ok"],
      (e) => ((e as Error).message === "fatal" ? undefined : 7),
      "threw fatal",
      2,
      [7],
    ],
    [
      "the failure sets the delay (retry-after)",
      [fail("40"), fail("60"), "ok"],
      (e) => Number((e as Error).message),
      "ok",
      3,
      [40, 60],
    ],
  ])("%s", async (_row, outcomes, delayFor, result, calls, waits) => {
    const r = await drive(outcomes, delayFor);
    expect(r.result).toBe(result);
    expect(r.calls).toBe(calls);
    expect(r.waits).toEqual(waits);
    expect(r.retries).toEqual(waits.map((_w, i) => i + 1));
  });

  it("passes the attempt number to run and to delayFor", async () => {
    const seen: number[] = [];
    await retryLoop(
      async (attempt) => {
        seen.push(attempt);
        if (attempt < 2) throw new Error("x");
      },
      {
        delayFor: (_e, attempt) => {
          seen.push(100 + attempt);
          return 0;
        },
        sleep: async () => {},
      },
    );
    expect(seen).toEqual([0, 100, 1, 101, 2]);
  });

  it("rethrows at once when the signal aborted during the attempt", async () => {
    const c = new AbortController();
    let asked = 0;
    const err = await retryLoop(
      async () => {
        c.abort(new Error("stop"));
        throw new Error("during");
      },
      {
        delayFor: () => {
          asked++;
          return 0;
        },
        signal: c.signal,
        sleep: async () => {},
      },
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe("during");
    expect(asked).toBe(0);
  });

  it("an abort during the wait rejects with the signal's reason", async () => {
    const c = new AbortController();
    const reason = new Error("bye");
    const p = retryLoop(
      async () => {
        throw new Error("x");
      },
      { delayFor: () => 60_000, signal: c.signal, onRetry: () => c.abort(reason) },
    );
    await expect(p).rejects.toBe(reason);
  });
});

describe("abortableSleep", () => {
  it("rejects with the signal's reason", async () => {
    const c = new AbortController();
    const p = abortableSleep(60_000, c.signal);
    const reason = new Error("bye");
    c.abort(reason);
    await expect(p).rejects.toBe(reason);
  });

  it("rejects at once on an already aborted signal", async () => {
    const c = new AbortController();
    c.abort(new Error("early"));
    await expect(abortableSleep(60_000, c.signal)).rejects.toThrow("early");
  });

  it("resolves after the wait", async () => {
    await expect(abortableSleep(1)).resolves.toBeUndefined();
  });
});
