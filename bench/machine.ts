/**
 * A fixed CPU workload (median of 5 runs, ms; lower is faster): figures from different machines,
 * days or hours are comparable only beside it (this machine ran the same code's in-process turns
 * bench at 0.24 ms per turn one day and 0.55 ms another). `npm run bench` times it before
 * anything else, the gateway bench again at the start and end of its section.
 */
export function machineReference(): number {
  const doc = {
    id: "m-0123456789",
    role: "assistant",
    content: "x".repeat(200),
    usage: { input: 40, output: 8 },
    tags: [1, 2, 3, "four"],
  };
  const times: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    let n = 0;
    for (let i = 0; i < 20_000; i++) n += (JSON.parse(JSON.stringify({ ...doc, i })) as { i: number }).i;
    const m = new Map<string, number>();
    for (let i = 0; i < 100_000; i++) m.set(`k${i % 5000}`, i);
    times.push(performance.now() - t0 + (n === -1 ? 1 : 0));
  }
  return times.sort((a, b) => a - b)[2] ?? Number.NaN;
}
