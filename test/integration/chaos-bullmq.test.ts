import { afterAll, expect, it } from "vitest";
import { NO_VIOLATIONS, runChaos, violations } from "../../bench/chaos.js";
import { killSpawned } from "../../bench/proc.js";
import { REDIS_URL } from "../helpers.js";
import { describeRedis } from "../redis.js";

// a test that timed out never reached the harness's own cleanup: its processes end here
afterAll(killSpawned);

/**
 * SIGKILL chaos (issue 11) on the redis store + bullmq queue: one gateway and two worker
 * processes (test/fixtures/file-channel-gateway.ts, ROLE=worker: the real app in the worker role,
 * plus the file channel so the turns a worker runs can post) on a random key prefix. The victims
 * take turns — gateway, worker, worker, gateway — each killed at a random moment and restarted;
 * lock and stall checks are 1 s, so a dead worker's turn moves on within ~2 s.
 */
describeRedis("chaos: SIGKILL the gateway and its workers at random moments (redis store + bullmq)", () => {
  it("loses no acked message, writes no transcript line twice, posts nothing twice, announces every spawn exactly once", {
    timeout: 180_000,
  }, async () => {
    const f = await runChaos({
      driver: "bullmq",
      kills: 4,
      lifeMs: [800, 1500],
      concurrency: 6,
      maxSent: 240,
      seed: 5,
      redisUrl: REDIS_URL,
    });
    expect(f.killed.gateway).toBeGreaterThan(0);
    expect(f.killed.worker).toBeGreaterThan(0);
    expect(f.acked).toBeGreaterThan(20);
    expect(f.spawns).toBeGreaterThan(0);
    // the README's window (a crash between the platform's yes and the mark) is counted apart,
    // and only with the gateway's warn line for that key
    expect(f.dupPostsResent).toBeLessThanOrEqual(f.resends);
    expect(violations(f)).toEqual(NO_VIOLATIONS);
  });
});
