import path from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The files that start processes (gateways, workers, redis-server, fresh nodes) and take 8–20 s on
 * an idle 2-core machine, longest first.
 */
const SLOW = [
  "test/integration/leases-chaos.test.ts",
  "test/integration/chaos-bullmq.test.ts",
  "test/integration/chaos.test.ts",
  "test/integration/crash.test.ts",
  "test/integration/mcp-client.test.ts",
  "test/integration/approvals-restart.test.ts",
  "test/integration/pipeline-bullmq-multiprocess.test.ts",
  "test/integration/cli.test.ts",
  "test/unit/cli/heap-growth.test.ts",
];

/**
 * Longest first. Vitest orders files by the durations it cached from the last run, and files it
 * has no duration for by size; a clean clone (CI's first pass) has none, and the files above are
 * small, so they ran last and one worker sat idle while the other finished a 15 s chaos test.
 * Without cached durations they go first; with them, vitest's own order stands.
 */
class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rel = (f: TestSpecification) => path.relative(this.ctx.config.root, f.moduleId);
    if (sorted.some((f) => this.ctx.cache.getFileTestResults(`${f.project.name}:${rel(f)}`))) return sorted;
    const rank = (f: TestSpecification) => {
      const i = SLOW.indexOf(rel(f));
      return i === -1 ? SLOW.length : i;
    };
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}

/**
 * Files that must have a process of their own: they change the process (fake timers, env vars,
 * process listeners, V8 flags, a module mock), measure it (RSS, heap), count into module-level
 * state (prom-client's registry) or start and kill processes whose timing they judge. Every
 * other file runs in a worker shared with the files before it (modules loaded once per worker):
 * a fresh process and module graph per file was ~0.7 s of CPU each, about a third of a pass.
 */
const OWN_PROCESS = [
  ...SLOW,
  "test/channels/discord-after-slack.test.ts",
  "test/integration/disk-full-injected.test.ts",
  "test/integration/fuzz.test.ts",
  "test/integration/metrics.test.ts",
  "test/unit/agent/providers/retry.test.ts",
  "test/unit/cli/commands.test.ts",
  "test/unit/deadlines.test.ts",
  "test/unit/journal/journal.test.ts",
  "test/unit/media/sink.test.ts",
  "test/unit/media/understand-images.test.ts",
];

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // expect.poll gives up after 1 s by default: too short for a browser or a child process on a
    // loaded 2-core machine (an upload's chip took longer in a full-suite run). A poll still
    // returns as soon as it passes.
    expect: { poll: { timeout: 10_000 } },
    pool: "forks",
    maxWorkers: 2,
    sequence: { sequencer: SlowFirst },
    projects: [
      { extends: true, test: { name: "own", include: OWN_PROCESS, isolate: true } },
      {
        extends: true,
        test: { name: "shared", include: ["test/**/*.test.ts"], exclude: OWN_PROCESS, isolate: false },
      },
    ],
  },
});
