import type { ScriptDef } from "../scripts.js";

/**
 * budgetReserve-2: admits a model call under every budget limit that applies and reserves its
 * expected spend on each, or refuses naming the first limit reached — in one step, so parallel
 * admissions at a limit (any number of processes) let at most one call past it.
 * KEYS: the day hash, the month hash (fields `<scope>|c`, `|t` settled cost/tokens, `|rc`, `|rt` reserved).
 * ARGV: n, expectedCost, expectedTokens, ttlDayMs, ttlMonthMs, then n × (keyIndex 1|2, scope,
 * maxCost or "", maxTokens or "").
 * Returns {1} when admitted; {0, limitIndex, cost, tokens} (settled + reserved, as strings) when refused.
 */
export const budgetReserve: ScriptDef = {
  name: "budgetReserve-2",
  numberOfKeys: 2,
  lua: `
local n = tonumber(ARGV[1])
local ec = tonumber(ARGV[2])
local et = tonumber(ARGV[3])
local function num(k, f) return tonumber(redis.call("HGET", k, f) or "0") or 0 end
for i = 1, n do
  local b = 5 + (i - 1) * 4
  local k = KEYS[tonumber(ARGV[b + 1])]
  local s = ARGV[b + 2]
  local cost = num(k, s .. "|c") + num(k, s .. "|rc")
  local tok = num(k, s .. "|t") + num(k, s .. "|rt")
  if (ARGV[b + 3] ~= "" and cost >= tonumber(ARGV[b + 3])) or (ARGV[b + 4] ~= "" and tok >= tonumber(ARGV[b + 4])) then
    return {0, i, tostring(cost), tostring(tok)}
  end
end
for i = 1, n do
  local b = 5 + (i - 1) * 4
  local k = KEYS[tonumber(ARGV[b + 1])]
  local s = ARGV[b + 2]
  redis.call("HINCRBYFLOAT", k, s .. "|rc", ec)
  redis.call("HINCRBYFLOAT", k, s .. "|rt", et)
end
redis.call("PEXPIRE", KEYS[1], ARGV[4])
redis.call("PEXPIRE", KEYS[2], ARGV[5])
return {1}
`,
};

/**
 * budgetSettle-2: replaces a reservation by the real spend (0 for a failed call) on each account.
 * KEYS: the day hash, the month hash. ARGV: n, reservedCost, reservedTokens, actualCost,
 * actualTokens, ttlDayMs, ttlMonthMs, then n × (keyIndex 1|2, scope). Returns 1.
 */
export const budgetSettle: ScriptDef = {
  name: "budgetSettle-2",
  numberOfKeys: 2,
  lua: `
local n = tonumber(ARGV[1])
for i = 1, n do
  local b = 7 + (i - 1) * 2
  local k = KEYS[tonumber(ARGV[b + 1])]
  local s = ARGV[b + 2]
  if tonumber(redis.call("HINCRBYFLOAT", k, s .. "|rc", -tonumber(ARGV[2]))) < 0 then redis.call("HSET", k, s .. "|rc", 0) end
  if tonumber(redis.call("HINCRBYFLOAT", k, s .. "|rt", -tonumber(ARGV[3]))) < 0 then redis.call("HSET", k, s .. "|rt", 0) end
  redis.call("HINCRBYFLOAT", k, s .. "|c", ARGV[4])
  redis.call("HINCRBYFLOAT", k, s .. "|t", ARGV[5])
end
redis.call("PEXPIRE", KEYS[1], ARGV[6])
redis.call("PEXPIRE", KEYS[2], ARGV[7])
return 1
`,
};
