import type { ScriptDef } from "../scripts.js";

/**
 * extendTurn-2 (collect mode): move the given runIds from the mailbox head into the turn in
 * `act`, in order, stopping at the first one that is no longer at the head (cancelled meanwhile).
 * KEYS: act, mailbox. ARGV: jobId, runPrefix, id1, id2, …
 * Returns how many were taken (0 when `act` is not this job's).
 */
export const extendTurn: ScriptDef = {
  name: "extendTurn-2",
  numberOfKeys: 2,
  lua: `
if redis.call("HGET", KEYS[1], "job") ~= ARGV[1] then return 0 end
local ids = cjson.decode(redis.call("HGET", KEYS[1], "ids"))
local n = 0
for i = 3, #ARGV do
  if redis.call("LINDEX", KEYS[2], 0) ~= ARGV[i] then break end
  redis.call("LPOP", KEYS[2])
  redis.call("HSET", ARGV[2] .. ARGV[i], "st", "a")
  ids[#ids + 1] = ARGV[i]
  n = n + 1
end
if n > 0 then redis.call("HSET", KEYS[1], "ids", cjson.encode(ids)) end
return n
`,
};
