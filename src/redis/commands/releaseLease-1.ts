import type { ScriptDef } from "../scripts.js";

/**
 * releaseLease-1: gives a lease up at once (SIGTERM, a stopped account) so another gateway takes
 * it on its next renewal instead of after the ttl. Only the holder with this fencing token may.
 * KEYS: lease. ARGV: holder id, token. Returns 1 when released, 0 when it was not this holder's.
 */
export const releaseLease: ScriptDef = {
  name: "releaseLease-1",
  numberOfKeys: 1,
  lua: `
local raw = redis.call("GET", KEYS[1])
if not raw then return 0 end
local ok, v = pcall(cjson.decode, raw)
if ok and type(v) == "table" and v.h == ARGV[1] and v.t == tonumber(ARGV[2]) then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
`,
};
