import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // expect.poll gives up after 1 s by default: too short for a browser or a child process on a
    // loaded 2-core machine (an upload's chip took longer in a full-suite run). A poll still
    // returns as soon as it passes.
    expect: { poll: { timeout: 10_000 } },
    pool: "forks",
    maxWorkers: 2,
  },
});
