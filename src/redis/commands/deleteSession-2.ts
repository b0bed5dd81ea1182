import type { ScriptDef } from "../scripts.js";

/**
 * deleteSession-2 — removes one session entry and every index entry pointing at it, atomically.
 *
 * KEYS[1] session hash            P:sess:<key>
 * KEYS[2] sessionId index hash    P:idx:sid
 * ARGV[1] session key (the zset member)
 * Returns 1 when an entry was deleted, 0 when there was none.
 *
 * The index entries to remove are the ones recorded in the hash (field ix, see putSession-6).
 */
export const deleteSession: ScriptDef = {
  name: "deleteSession-2",
  numberOfKeys: 2,
  lua: `
local ix = redis.call("HGET", KEYS[1], "ix")
if not ix then return 0 end
ix = cjson.decode(ix)
local member = ARGV[1]
if redis.call("HGET", KEYS[2], ix[1]) == member then redis.call("HDEL", KEYS[2], ix[1]) end
for i = 2, 5 do
  if ix[i] ~= "" then redis.call("ZREM", ix[i], member) end
end
redis.call("DEL", KEYS[1])
return 1
`,
};
