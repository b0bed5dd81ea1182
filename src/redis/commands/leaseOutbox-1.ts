import type { ScriptDef } from "../scripts.js";

/**
 * leaseOutbox-1 — takes a short sending lease on an outbox record (at-least-once delivery).
 *
 * KEYS[1] outbox record           P:outbox:<id>
 * ARGV[1] now (ms), ARGV[2] lease ms, ARGV[3] how long the record is kept (ms)
 * Returns {1, expired(0|1)} when taken; {0, "done", record JSON}; {0, "leased", ms left}.
 * A record without `leaseUntil` (a plain claim) counts as leased until its key expires.
 */
export const leaseOutbox: ScriptDef = {
  name: "leaseOutbox-1",
  numberOfKeys: 1,
  lua: `
local now = tonumber(ARGV[1])
local raw = redis.call("GET", KEYS[1])
local expired = 0
if raw then
  local ok, rec = pcall(cjson.decode, raw)
  if ok and type(rec) == "table" and rec.state == "done" then return {0, "done", raw} end
  local untilMs = nil
  if ok and type(rec) == "table" then untilMs = tonumber(rec.leaseUntil) end
  if untilMs == nil then
    local left = redis.call("PTTL", KEYS[1])
    if left < 0 then left = tonumber(ARGV[2]) end
    return {0, "leased", left}
  end
  if untilMs > now then return {0, "leased", untilMs - now} end
  expired = 1
end
local keep = math.max(tonumber(ARGV[3]), tonumber(ARGV[2]))
redis.call("SET", KEYS[1], cjson.encode({state = "claimed", leaseUntil = now + tonumber(ARGV[2])}), "PX", keep)
return {1, expired}
`,
};
