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

for (const name of benches) {
  const mod = (await import(`./${name}.js`)) as { run?: () => Promise<unknown> };
  if (typeof mod.run !== "function") {
    process.stdout.write(`bench ${name}: no run() export, skipped\n`);
    continue;
  }
  process.stdout.write(`\n=== ${name} ===\n`);
  await mod.run();
}
