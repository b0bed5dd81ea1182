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
