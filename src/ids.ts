import { createHash } from "node:crypto";

/**
 * Derived ids: the one place an id is computed from a seed. Effects of a job use them so that a
 * re-run after a crash reuses what the first run made — a spawned sub-agent's key, session and run
 * (subagents/apply.ts), a routed message's run (routing), a cron tick's isolated session
 * (cron/service.ts), a webhook's session (gateway/hooks-agent.ts). Ids derived here end up in
 * stored session keys, so the derivation never changes: test/unit/ids.test.ts reads keys written
 * before it moved here.
 */

/**
 * A UUID v4-shaped id derived from `seed` (SHA-256: version nibble 4, variant 10): the same seed
 * always gives the same id.
 */
export function uuidFrom(seed: string): string {
  const h = createHash("sha256").update(seed).digest();
  h[6] = (h[6]! & 0x0f) | 0x40;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
