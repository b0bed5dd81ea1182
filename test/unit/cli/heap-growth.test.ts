import { describe, expect, it } from "vitest";
import { distModule, runFreshNode } from "../../helpers.js";

/**
 * `tightenHeapGrowth` in a fresh node (built dist): with it, a heap that keeps a little and throws
 * away a lot stays near its live set; without it, V8 lets it grow to several times that. A
 * `--heap-growing-percent` given to node is left alone.
 */
const FLAGS = ["--max-semi-space-size=4"];

function run(call: boolean): Promise<{ applied: boolean; peakMb: number }> {
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
  return runFreshNode(script, FLAGS);
}

describe("tightenHeapGrowth", () => {
  it("keeps the heap near its live set", async () => {
    const loose = await run(false);
    let tight = await run(true);
    expect(tight.applied).toBe(true);
    // ~0.35–0.45 of the loose peak on Node 20 and 24, idle or loaded. A run whose concurrent GC
    // threads get no CPU (a machine loaded 15× its cores) can overshoot once while its marking
    // waits (seen: 129 and 141 MB against ~70, in 2 of ~35 runs); so a second run decides, and the peak
    // must hold in one of the two — without the cap both sit at the loose peak (ratio ~1).
    if (tight.peakMb >= loose.peakMb * 0.75) {
      const again = await run(true);
      if (again.peakMb < tight.peakMb) tight = again;
    }
    expect(tight.peakMb).toBeLessThan(loose.peakMb * 0.75);
  }, 60_000); // up to three fresh nodes, one after another

  it("leaves a --heap-growing-percent given to node alone", async () => {
    const script = `
      const { tightenHeapGrowth } = await import(${distModule("cli/serve.js")});
      console.log(JSON.stringify({ applied: tightenHeapGrowth() }));`;
    const r = await runFreshNode<{ applied: boolean }>(script, [...FLAGS, "--heap-growing-percent=300"]);
    expect(r.applied).toBe(false);
  });
});
