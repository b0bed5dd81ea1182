/**
 * `npm run bench`: runs every benchmark in turn and prints its figures. Budgets (DESIGN.md) are
 * printed beside the numbers; nothing here is asserted.
 */
const benches = [
  "store-fs",
  "store-redis",
  "pipeline-local",
  "turns",
  "pipeline-bullmq",
  "gateway",
  "prompt-build",
];

/**
 * A fixed CPU workload timed before anything else (median of 5): figures from different machines
 * or days are comparable only beside it (this machine ran the same code's in-process turns bench
 * at 0.24 ms per turn one day and 0.55 ms another).
 */
function machineReference(): number {
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

process.stdout.write(
  `machine reference (fixed JS workload, lower is faster): ${machineReference().toFixed(1)} ms\n`,
);

/** The scale figures (1M sessions) run in their own process: SB_BENCH_SCALE=0 skips them. */
async function scale(): Promise<void> {
  if (process.env.SB_BENCH_SCALE === "0") return;
  const { spawnSync } = await import("node:child_process");
  const { fileURLToPath } = await import("node:url");
  for (const name of ["store-fs", "store-redis"]) {
    process.stdout.write(`\n=== ${name} at 1,000,000 sessions ===\n`);
    spawnSync(process.execPath, ["--expose-gc", fileURLToPath(new URL(`./${name}.js`, import.meta.url))], {
      stdio: "inherit",
      env: { ...process.env, SB_BENCH_SESSIONS: "1000000" },
    });
  }
}

for (const name of benches) {
  const mod = (await import(`./${name}.js`)) as { run?: () => Promise<unknown> };
  if (typeof mod.run !== "function") {
    process.stdout.write(`bench ${name}: no run() export, skipped\n`);
    continue;
  }
  process.stdout.write(`\n=== ${name} ===\n`);
  await mod.run();
}
await scale();
