import type { ScriptDef } from "../scripts.js";

/**
 * usageAdd-10: counts one finished turn (usage/redis-counts.ts) in one step.
 * KEYS: the usage hashes of the day, then of the month, each for the dimensions global, agent,
 * session, channel, model. ARGV: cost (USD), input tokens, output tokens, runs (1, or 0 for a
 * compaction's spend), then per key `+<id>` ("" = the turn has no such id: the key is left alone)
 * and the ms when the key expires. Adds cost to field `<id>|c` (HINCRBYFLOAT), tokens to `<id>|i`
 * / `<id>|o` and the runs to `<id>|r` (HINCRBY), and sets the key's expiry. Returns the number of
 * keys written.
 */
export const usageAdd: ScriptDef = {
  name: "usageAdd-10",
  numberOfKeys: 10,
  lua: `
local n = 0
for k = 1, #KEYS do
  local id = ARGV[3 + 2 * k]
  if id ~= "" then
    id = string.sub(id, 2)
    redis.call("HINCRBYFLOAT", KEYS[k], id .. "|c", ARGV[1])
    redis.call("HINCRBY", KEYS[k], id .. "|i", ARGV[2])
    redis.call("HINCRBY", KEYS[k], id .. "|o", ARGV[3])
    redis.call("HINCRBY", KEYS[k], id .. "|r", ARGV[4])
    redis.call("PEXPIREAT", KEYS[k], ARGV[4 + 2 * k])
    n = n + 1
  end
end
return n
`,
};
