import type { ScriptDef } from "../scripts.js";

/**
 * takeTurn-4: the drain job of a session takes its next turn.
 * KEYS: act, mailbox, sched, live audience. ARGV: jobId, runPrefix, cancelPrefix, jobPrefix,
 * peekWindow, audience member ("": do not count), lock token, lock ms.
 * - Lock ms > 0: the taker is not a BullMQ job but a process running the turn directly
 *   (direct.ts); a turn taken sets the lock key `jobPrefix .. jobId .. ":lock"` to the token for
 *   that long, as BullMQ does for a job, so the fences and the busy check below treat both alike.
 * - A turn already in `act` (its worker crashed, stalled or handed it back) is resumed with
 *   attempt + 1 — unless another live drain job (its lock key exists) owns it: "busy".
 * - Else the mailbox head is popped into `act` (attempt 1) and marked taken; an empty mailbox
 *   clears `sched` (the next producer adds a drain job again).
 * - The audience is the number of gateways whose /ws clients may watch the turn: members of the
 *   live audience zset whose expiry (score, ms) is still ahead of the server's clock, not counting
 *   the caller's own member (its events reach its own clients without Redis); -1 when not asked.
 * Reply: {"empty"} | {"busy"} |
 *   {kind, attempt, audience, n, id1, env1, flag1, …, idn, envn, flagn, peek…}
 * where kind is "new" or "resume", flag is the cancel reason or "", and `peek` (only for "new"
 * with peekWindow > 0) is up to peekWindow pairs id, env of the messages behind the head.
 */
export const takeTurn: ScriptDef = {
  name: "takeTurn-4",
  numberOfKeys: 4,
  lua: `
local act = KEYS[1]
local ids
local attempt
local kind
if redis.call("EXISTS", act) == 1 then
  local owner = redis.call("HGET", act, "job")
  if owner and owner ~= ARGV[1] and redis.call("EXISTS", ARGV[4] .. owner .. ":lock") == 1 then
    return {"busy"}
  end
  attempt = redis.call("HINCRBY", act, "attempt", 1)
  redis.call("HSET", act, "job", ARGV[1])
  ids = cjson.decode(redis.call("HGET", act, "ids"))
  kind = "resume"
else
  local id = redis.call("LPOP", KEYS[2])
  if not id then
    redis.call("DEL", KEYS[3])
    return {"empty"}
  end
  ids = {id}
  attempt = 1
  redis.call("HSET", act, "ids", cjson.encode(ids), "attempt", 1, "job", ARGV[1])
  redis.call("HSET", ARGV[2] .. id, "st", "a")
  kind = "new"
end
if tonumber(ARGV[8]) > 0 then
  redis.call("SET", ARGV[4] .. ARGV[1] .. ":lock", ARGV[7], "PX", ARGV[8])
end
local audience = -1
if ARGV[6] ~= "" then
  local t = redis.call("TIME")
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  audience = redis.call("ZCOUNT", KEYS[4], "(" .. now, "+inf")
  local own = redis.call("ZSCORE", KEYS[4], ARGV[6])
  if own and tonumber(own) > now then audience = audience - 1 end
end
local out = {kind, attempt, audience, #ids}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call("HGET", ARGV[2] .. id, "env") or ""
  out[#out + 1] = redis.call("GET", ARGV[3] .. id) or ""
end
local window = tonumber(ARGV[5])
if kind == "new" and window > 0 then
  for _, id in ipairs(redis.call("LRANGE", KEYS[2], 0, window - 1)) do
    out[#out + 1] = id
    out[#out + 1] = redis.call("HGET", ARGV[2] .. id, "env") or ""
  end
end
return out
`,
};
