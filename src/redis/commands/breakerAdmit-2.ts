import type { ScriptDef } from "../scripts.js";

/**
 * breakerAdmit-2: may a call go to this model (failover circuit breaker, API.md §8.4)?
 * KEYS: circuit hash {failures, openUntil, lastClass}, probe key. ARGV: now (ms), probe ttl (ms).
 * Returns {verdict, failures, openUntil, lastClass}: verdict 0 go (closed), 1 skip (open, or
 * half-open with another caller's probe out), 2 go as the one half-open probe (SET NX: one
 * caller across every worker wins it).
 */
export const breakerAdmit: ScriptDef = {
  name: "breakerAdmit-2",
  numberOfKeys: 2,
  lua: `
local v = redis.call("HMGET", KEYS[1], "failures", "openUntil", "lastClass")
local failures = tonumber(v[1]) or 0
local openUntil = tonumber(v[2]) or 0
local lastClass = v[3] or ""
if openUntil == 0 then return {0, failures, 0, lastClass} end
if tonumber(ARGV[1]) < openUntil then return {1, failures, openUntil, lastClass} end
if redis.call("SET", KEYS[2], "1", "NX", "PX", ARGV[2]) then return {2, failures, openUntil, lastClass} end
return {1, failures, openUntil, lastClass}
`,
};
