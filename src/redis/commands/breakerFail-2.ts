import type { ScriptDef } from "../scripts.js";

/**
 * breakerFail-2: one failed call of a model (failover circuit breaker, API.md §8.4).
 * KEYS: circuit hash, probe key. ARGV: now (ms), failuresToOpen, cooldown (ms), class, probe (0|1),
 * keep (ms: how long an untouched circuit is remembered).
 * Counts the failure; opens the circuit for the cooldown at `failuresToOpen` consecutive failures,
 * or at once when the failed call was the half-open probe. Returns {failures, openUntil}.
 */
export const breakerFail: ScriptDef = {
  name: "breakerFail-2",
  numberOfKeys: 2,
  lua: `
local failures = redis.call("HINCRBY", KEYS[1], "failures", 1)
redis.call("HSET", KEYS[1], "lastClass", ARGV[4])
local openUntil = tonumber(redis.call("HGET", KEYS[1], "openUntil")) or 0
if ARGV[5] == "1" or failures >= tonumber(ARGV[2]) then
  openUntil = tonumber(ARGV[1]) + tonumber(ARGV[3])
  redis.call("HSET", KEYS[1], "openUntil", openUntil)
  redis.call("DEL", KEYS[2])
end
redis.call("PEXPIRE", KEYS[1], ARGV[6])
return {failures, openUntil}
`,
};
