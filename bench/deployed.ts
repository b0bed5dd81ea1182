/**
 * How `npm start` and the Docker image run node (package.json `start`, Dockerfile `ENV` and
 * `ENTRYPOINT`; test/unit/container.test.ts keeps the three equal), so the benches measure the
 * gateway as it is deployed:
 * - `--max-semi-space-size=4`: a small young generation (README, "Memory");
 * - `MALLOC_ARENA_MAX=2`: glibc's malloc keeps at most two arenas instead of eight per core, one
 *   for each thread that allocated (libuv's pool, V8's helpers), each holding freed memory: 6-7 MB
 *   less RSS under load on the bench VM (149 → 143 MB after 100k turns, 113 → 107 MB idle).
 */
export const DEPLOYED_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=4"];
export const DEPLOYED_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: "2" };
