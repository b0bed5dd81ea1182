import type { ScriptDef } from "../scripts.js";

/**
 * The budget ledger's accounts (src/usage/redis-ledger.ts). KEYS, for both scripts: the day hash,
 * the month hash (fields `<scope>|c`, `|t` settled cost/tokens, `|rc`, `|rt` reserved, and
 * `r|<id>` each held reservation: `{c, t, s: [scopes]}`), then the day's and the month's sorted
 * set of held reservation ids by expiry. Key index 1 is the day, 2 the month.
 */
const RELEASE = `
local function num(k, f) return tonumber(redis.call("HGET", k, f) or "0") or 0 end
local function dec(k, f, v)
  if v ~= 0 and tonumber(redis.call("HINCRBYFLOAT", k, f, -v)) < 0 then redis.call("HSET", k, f, 0) end
end
-- gives a held reservation's amounts back to its accounts of period p; true when it was held
local function release(p, id)
  local k = KEYS[p]
  local raw = redis.call("HGET", k, "r|" .. id)
  redis.call("ZREM", KEYS[p + 2], id)
  if not raw then return false end
  local r = cjson.decode(raw)
  for _, s in ipairs(r.s) do
    dec(k, s .. "|rc", r.c)
    dec(k, s .. "|rt", r.t)
  end
  redis.call("HDEL", k, "r|" .. id)
  return true
end
`;

/**
 * budgetReserve-4: admits a model call (or a turn's hold) under every budget limit that applies
 * and reserves its expected spend on each, or refuses naming the first limit reached, in one step,
 * so parallel admissions at a limit (any number of processes) let at most one call past it.
 * Lapsed reservations (expiry ≤ now, at most 50 a call) go back first. A hold this reservation
 * takes over is released; while one was still held the limit check is skipped (the turn was
 * admitted for this call). Reserving an id again replaces what it held.
 * ARGV: now, id, expiresAt, expectedCost, expectedTokens, ttlDayMs, ttlMonthMs, m, m × hold id,
 * n, n × (keyIndex 1|2, scope, maxCost or "", maxTokens or "").
 * Returns {1} when admitted; {0, limitIndex, cost, tokens} (settled + reserved, as strings) when refused.
 */
export const budgetReserve: ScriptDef = {
  name: "budgetReserve-4",
  numberOfKeys: 4,
  lua: `${RELEASE}
local now = tonumber(ARGV[1])
for p = 1, 2 do
  for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[p + 2], "-inf", now, "LIMIT", 0, 50)) do
    release(p, id)
  end
end
local m = tonumber(ARGV[8])
local took = false
for i = 1, m do
  local a = release(1, ARGV[8 + i])
  local b = release(2, ARGV[8 + i])
  if a or b then took = true end
end
release(1, ARGV[2])
release(2, ARGV[2])
local base = 9 + m
local n = tonumber(ARGV[base])
if not took then
  for i = 1, n do
    local b = base + (i - 1) * 4
    local k = KEYS[tonumber(ARGV[b + 1])]
    local s = ARGV[b + 2]
    local cost = num(k, s .. "|c") + num(k, s .. "|rc")
    local tok = num(k, s .. "|t") + num(k, s .. "|rt")
    if (ARGV[b + 3] ~= "" and cost >= tonumber(ARGV[b + 3])) or (ARGV[b + 4] ~= "" and tok >= tonumber(ARGV[b + 4])) then
      return {0, i, tostring(cost), tostring(tok)}
    end
  end
end
local ec = tonumber(ARGV[4])
local et = tonumber(ARGV[5])
local scopes = {{}, {}}
for i = 1, n do
  local b = base + (i - 1) * 4
  local p = tonumber(ARGV[b + 1])
  local s = ARGV[b + 2]
  redis.call("HINCRBYFLOAT", KEYS[p], s .. "|rc", ec)
  redis.call("HINCRBYFLOAT", KEYS[p], s .. "|rt", et)
  table.insert(scopes[p], s)
end
for p = 1, 2 do
  if #scopes[p] > 0 then
    redis.call("HSET", KEYS[p], "r|" .. ARGV[2], cjson.encode({c = ec, t = et, s = scopes[p]}))
    redis.call("ZADD", KEYS[p + 2], ARGV[3], ARGV[2])
  end
  redis.call("PEXPIRE", KEYS[p], ARGV[5 + p])
  redis.call("PEXPIRE", KEYS[p + 2], ARGV[5 + p])
end
return {1}
`,
};

/**
 * budgetSettle-4: replaces a reservation by the real spend (0 for a failed call) on each account
 * (a lapsed reservation has nothing left to give back: the spend is added all the same).
 * ARGV: id, actualCost, actualTokens, ttlDayMs, ttlMonthMs, n, n × (keyIndex 1|2, scope).
 * Returns each limit's settled cost and tokens after, as strings: {c1, t1, c2, t2, …}.
 */
export const budgetSettle: ScriptDef = {
  name: "budgetSettle-4",
  numberOfKeys: 4,
  lua: `${RELEASE}
release(1, ARGV[1])
release(2, ARGV[1])
local n = tonumber(ARGV[6])
local out = {}
for i = 1, n do
  local b = 6 + (i - 1) * 2
  local k = KEYS[tonumber(ARGV[b + 1])]
  local s = ARGV[b + 2]
  table.insert(out, redis.call("HINCRBYFLOAT", k, s .. "|c", ARGV[2]))
  table.insert(out, redis.call("HINCRBYFLOAT", k, s .. "|t", ARGV[3]))
end
for p = 1, 2 do
  redis.call("PEXPIRE", KEYS[p], ARGV[3 + p])
  redis.call("PEXPIRE", KEYS[p + 2], ARGV[3 + p])
end
return out
`,
};

/**
 * budgetRelease-8: gives back what held reservations (a turn's holds) still hold, found in the
 * period they were reserved in: KEYS 1–4 are the accounts of the periods containing now (as above),
 * 5–8 those of the day and the month before (a hold lapses within minutes, so one reserved before
 * a UTC midnight or month end is in one of the two). ARGV: the ids. Returns how many were held.
 */
export const budgetRelease: ScriptDef = {
  name: "budgetRelease-8",
  numberOfKeys: 8,
  lua: `${RELEASE}
local n = 0
for _, id in ipairs(ARGV) do
  local held = false
  for _, p in ipairs({1, 2, 5, 6}) do
    if release(p, id) then held = true end
  end
  if held then n = n + 1 end
end
return n
`,
};
