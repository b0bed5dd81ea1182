import { describe, expect, it } from "vitest";
import { distModule, runFreshNode } from "../../helpers.js";

/**
 * `tightenHeapGrowth` in a fresh node (built dist): with it, a heap that keeps a little and throws
 * away a lot stays near its live set; without it, V8 lets it grow to several times that. A
 * `--heap-growing-percent` given to node is left alone.
 */
function run(args: string[], call: boolean): Promise<{ applied: boolean; peakMb: number }> {
  const script = `
    const { tightenHeapGrowth } = await import(${distModule("cli/serve.js")});
    const live = []; for (let i = 0; i < 2e5; i++) live.push({ a: i, b: "x" + i });
    const applied = ${call} ? tightenHeapGrowth() : false;
    let junk, peak = 0;
    for (let r = 0; r < 40; r++) {
      junk = []; for (let i = 0; i < 1e5; i++) junk.push({ a: i, b: "y" + i });
      if (r % 3 === 0) live.push(junk.slice(0, 2000));
      peak = Math.max(peak, process.memoryUsage().heapTotal);
    }
    console.log(JSON.stringify({ applied, peakMb: peak / 1e6 }));`;
  return runFreshNode(script, args);
}

describe("tightenHeapGrowth", () => {
  it("keeps the heap near its live set, and leaves a node flag alone", async () => {
    const loose = await run(["--max-semi-space-size=4"], false);
    const tight = await run(["--max-semi-space-size=4"], true);
    expect(tight.applied).toBe(true);
    expect(tight.peakMb).toBeLessThan(loose.peakMb * 0.75);
    expect((await run(["--max-semi-space-size=4", "--heap-growing-percent=300"], true)).applied).toBe(false);
  }, 60_000); // three fresh nodes, run one after another
});
