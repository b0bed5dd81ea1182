/**
 * `npm run bench`: runs every benchmark in turn, each in its own node process, and prints its
 * figures. Budgets (DESIGN.md) are printed beside the numbers; nothing here is asserted.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { machineReference } from "./machine.js";

const benches = [
  "store-fs",
  "store-redis",
  "pipeline-local",
  "turns",
  "pipeline-bullmq",
  "gateway",
  "prompt-build",
  "markdown",
  "failover",
  "mcp",
  "media",
];

process.stdout.write(
  `machine reference (fixed JS workload, lower is faster): ${machineReference().toFixed(1)} ms\n`,
);

/** Runs `dist/bench/<name>.js` in a node of its own; says so when it did not exit cleanly. */
function runChild(name: string, env: NodeJS.ProcessEnv = process.env): void {
  const file = fileURLToPath(new URL(`./${name}.js`, import.meta.url));
  const r = spawnSync(process.execPath, ["--expose-gc", file], { stdio: "inherit", env });
  if (r.status !== 0) process.stdout.write(`bench ${name}: exited with ${r.status ?? r.signal}\n`);
}

// Each bench in a node of its own: one bench's heap and handles do not weigh on the next (run in
// this process, the gateway bench's clients and fake model shared a heap the turns and pipeline
// benches had grown to ~230 MB, and cost 0.38-0.42 ms a turn instead of ~0.22).
for (const name of benches) {
  process.stdout.write(`\n=== ${name} ===\n`);
  runChild(name);
}

// The scale figures (1M sessions): SB_BENCH_SCALE=0 skips them.
if (process.env.SB_BENCH_SCALE !== "0") {
  for (const name of ["store-fs", "store-redis"]) {
    process.stdout.write(`\n=== ${name} at 1,000,000 sessions ===\n`);
    runChild(name, { ...process.env, SB_BENCH_SESSIONS: "1000000" });
  }
}
