import type { ScriptDef } from "../scripts.js";

/**
 * acquireLease-2: takes or renews a channel account's lease (many gateways, API.md §8.5) in one
 * round trip; a gateway runs it once per account per `renewMs`, holder and standby alike.
 * KEYS: lease, fence counter. ARGV: holder id, config fingerprint, ttlMs.
 * The lease value is JSON `{t: fencing token, h: holder, f: fingerprint}` with a PX expiry.
 * Reply:
 *   {2, token, value}   taken now: the key was free (expired or released); the token is new
 *   {1, token, value}   renewed: this holder already held it (PX set again)
 *   {0, value, pttl}    another holder has it
 *   {-1, raw, pttl}     the key holds something that is not a lease (changed by hand): it is
 *                       given an expiry of at most one ttl, so it is gone within one lease
 */
export const acquireLease: ScriptDef = {
  name: "acquireLease-2",
  numberOfKeys: 2,
  lua: `
local raw = redis.call("GET", KEYS[1])
local ttl = tonumber(ARGV[3])
if raw then
  local ok, v = pcall(cjson.decode, raw)
  if not ok or type(v) ~= "table" or type(v.t) ~= "number" or type(v.h) ~= "string" then
    local pttl = redis.call("PTTL", KEYS[1])
    if pttl < 0 or pttl > ttl then
      redis.call("PEXPIRE", KEYS[1], ttl)
      pttl = ttl
    end
    return {-1, raw, pttl}
  end
  if v.h == ARGV[1] then
    redis.call("PEXPIRE", KEYS[1], ttl)
    return {1, v.t, raw}
  end
  return {0, raw, redis.call("PTTL", KEYS[1])}
end
local t = redis.call("INCR", KEYS[2])
local val = cjson.encode({t = t, h = ARGV[1], f = ARGV[2]})
redis.call("SET", KEYS[1], val, "PX", ttl)
return {2, t, val}
`,
};
