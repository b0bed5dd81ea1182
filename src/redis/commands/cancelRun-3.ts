import type { ScriptDef } from "../scripts.js";

/**
 * cancelRun-3: cancel from any process.
 * KEYS: run, mailbox (of the run's session), cancel flag. ARGV: runId, reason, flagTtlMs, retentionMs.
 * Returns "removed" (was queued: taken out of the mailbox, state x), "active" (running: the flag is
 * set, the caller broadcasts), or the final/unknown state ("d", "x", "gone", "none").
 */
export const cancelRun: ScriptDef = {
  name: "cancelRun-3",
  numberOfKeys: 3,
  lua: `
local st = redis.call("HGET", KEYS[1], "st")
if st == "q" then
  if redis.call("LREM", KEYS[2], 1, ARGV[1]) == 1 then
    redis.call("HSET", KEYS[1], "st", "x")
    redis.call("HDEL", KEYS[1], "env")
    redis.call("PEXPIRE", KEYS[1], ARGV[4])
    return "removed"
  end
  return "gone"
end
if st == "a" then
  redis.call("SET", KEYS[3], ARGV[2], "PX", ARGV[3])
  return "active"
end
return st or "none"
`,
};
