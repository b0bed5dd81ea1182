import type { ScriptDef } from "../scripts.js";

/**
 * sweepSession-3: the sweeper's check of one dirty session.
 * KEYS: mailbox, act, dirty. ARGV: sessionKey.
 * Returns 1 when the session needs a drain job; 0 (and forgets it) when it is idle.
 */
export const sweepSession: ScriptDef = {
  name: "sweepSession-3",
  numberOfKeys: 3,
  lua: `
if redis.call("LLEN", KEYS[1]) == 0 and redis.call("EXISTS", KEYS[2]) == 0 then
  redis.call("SREM", KEYS[3], ARGV[1])
  return 0
end
return 1
`,
};
