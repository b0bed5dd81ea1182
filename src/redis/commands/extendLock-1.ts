import type { ScriptDef } from "../scripts.js";

/**
 * extendLock-1: keeps a direct turn's lock alive (what BullMQ does for a job's lock).
 * KEYS: lock. ARGV: token, ms.
 * Returns 1 when extended; 0 when the lock is gone or another's: the turn is no longer this
 * process's, and an expired lock is never brought back.
 */
export const extendLock: ScriptDef = {
  name: "extendLock-1",
  numberOfKeys: 1,
  lua: `
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1
end
return 0
`,
};
