import { countTurn, metricsOn } from "./metrics.js";
import { markFollowUps, type TracedJob, tracedTurn } from "./trace.js";

/**
 * Telemetry (API.md §8.6): Prometheus metrics (metrics.ts) and OpenTelemetry traces (trace.ts),
 * on the ground floor since every room may count or trace. The call sites use the one-liners
 * below; each costs a boolean test or two while its half is off.
 */

export * from "./metrics.js";
export * from "./trace.js";

type FollowUps = Parameters<typeof markFollowUps>[0];

/**
 * A turn: its `switchboard.turn` span (`turnSpan(job)` inside `fn`), its count by final status and
 * its duration; the follow-ups it planned are marked so what they start links back to it.
 */
export function observeTurn<R extends { status: string; followUps?: FollowUps }>(
  job: TracedJob,
  fn: () => Promise<R>,
): Promise<R> {
  const t0 = metricsOn() ? performance.now() : 0;
  return tracedTurn(job, async (span) => {
    try {
      const r = await fn();
      if (r.followUps) markFollowUps(r.followUps, span);
      if (t0) countTurn(r.status, (performance.now() - t0) / 1000);
      return r;
    } catch (err) {
      if (t0) countTurn("error", (performance.now() - t0) / 1000);
      throw err;
    }
  });
}
