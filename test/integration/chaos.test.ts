import { afterAll, describe, expect, it } from "vitest";
import { NO_VIOLATIONS, runChaos, violations } from "../../bench/chaos.js";
import { killSpawned } from "../../bench/proc.js";

// a test that timed out never reached the harness's own cleanup: its processes end here
afterAll(killSpawned);

/**
 * SIGKILL chaos (issue 11), short version of `npm run chaos`: turns, sub-agent spawns and
 * sessions_send streamed into a gateway process that is killed at random moments and restarted.
 */
describe("chaos: SIGKILL the gateway at random moments (fs store + local queue)", () => {
  it("loses no acked message, writes no transcript line twice, posts nothing twice, announces every spawn exactly once", {
    timeout: 180_000,
  }, async () => {
    const f = await runChaos({ kills: 3, lifeMs: [400, 900], concurrency: 12, seed: 11 });
    expect(f.kills).toBe(3);
    expect(f.acked).toBeGreaterThan(10);
    expect(f.spawns).toBeGreaterThan(0);
    // dupPosts counts posts per delivery idempotency key (the fake records it) and per text.
    // The one duplicate the design admits (README: a crash after the platform's yes and before
    // the outbox mark) is counted apart, and only with the gateway's warn line for that key.
    expect(f.dupPostsResent).toBeLessThanOrEqual(f.resends);
    expect(violations(f)).toEqual(NO_VIOLATIONS);
  });
});
