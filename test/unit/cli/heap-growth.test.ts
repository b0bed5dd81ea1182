import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../../..");

/**
 * `tightenHeapGrowth` in a fresh node (built dist): with it, a heap that keeps a little and throws
 * away a lot stays near its live set; without it, V8 lets it grow to several times that. A
 * `--heap-growing-percent` given to node is left alone.
 */
function run(args: string[], call: boolean): { applied: boolean; peakMb: number } {
  const script = `
    const { tightenHeapGrowth } = await import(${JSON.stringify(path.join(ROOT, "dist/src/cli/serve.js"))});
    const live = []; for (let i = 0; i < 2e5; i++) live.push({ a: i, b: "x" + i });
    const applied = ${call} ? tightenHeapGrowth() : false;
    let junk, peak = 0;
    for (let r = 0; r < 40; r++) {
      junk = []; for (let i = 0; i < 1e5; i++) junk.push({ a: i, b: "y" + i });
      if (r % 3 === 0) live.push(junk.slice(0, 2000));
      peak = Math.max(peak, process.memoryUsage().heapTotal);
    }
    console.log(JSON.stringify({ applied, peakMb: peak / 1e6 }));`;
  const r = spawnSync(process.execPath, [...args, "--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "" },
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { applied: boolean; peakMb: number };
}

describe("tightenHeapGrowth", () => {
  it("keeps the heap near its live set, and leaves a node flag alone", () => {
    const loose = run(["--max-semi-space-size=4"], false);
    const tight = run(["--max-semi-space-size=4"], true);
    expect(tight.applied).toBe(true);
    expect(tight.peakMb).toBeLessThan(loose.peakMb * 0.75);
    expect(run(["--max-semi-space-size=4", "--heap-growing-percent=300"], true).applied).toBe(false);
  }, 60_000); // three fresh nodes, run one after another
});
