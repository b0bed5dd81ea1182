import type { ScriptDef } from "../scripts.js";

/**
 * putSession-6 — writes one session entry whole and moves it between every index, atomically;
 * optionally only when the entry is still at an expected revision (optimistic concurrency for
 * update/patch, whose merge runs in JS).
 *
 * KEYS[1] session hash              P:sess:<key>
 * KEYS[2] sessionId index hash      P:idx:sid
 * KEYS[3] global zset for the entry P:idx:live or P:idx:arch
 * KEYS[4] agent zset for the entry  P:idx:agent:<live|arch>:<agentId>
 * KEYS[5] label zset                (used only when ARGV[6] = "1")
 * KEYS[6] spawnedBy zset            (used only when ARGV[7] = "1")
 * ARGV[1] session key (the zset member)
 * ARGV[2] entry JSON
 * ARGV[3] updatedAt (the zset score)
 * ARGV[4] sessionId
 * ARGV[5] expected revision: "" = any, "0" = must not exist, n = must still be n
 * ARGV[6] "1" when the entry has a label
 * ARGV[7] "1" when the entry has spawnedBy
 * Returns the new revision, or -1 when the expected revision did not match. A record's first
 * revision is the server's clock in µs (+ 1 per write after), so a record deleted or expired and
 * written again never repeats a revision of its earlier life: a writer holding an old revision fails.
 *
 * Hash fields: data, rev, and ix = JSON [sessionId, global zset, agent zset, label zset or "",
 * spawnedBy zset or ""] — what this write indexed. The next write or delete removes the member
 * from those first, except from an index it writes again (the usual update: same sessionId, same
 * zsets), where HSET and ZADD simply overwrite; they carry the same hash tag, so they live in the
 * same slot. (Three fields rather than one per index key: the hash is hashtable-encoded because
 * `data` is long, and every extra field costs ~60 bytes per session.)
 */
export const putSession: ScriptDef = {
  name: "putSession-6",
  numberOfKeys: 6,
  lua: `
local cur = redis.call("HMGET", KEYS[1], "rev", "ix")
local rev = tonumber(cur[1]) or 0
if ARGV[5] ~= "" and tonumber(ARGV[5]) ~= rev then return -1 end
if rev == 0 then
  -- a new record: its revisions start at the server's clock in µs (see above)
  local t = redis.call("TIME")
  rev = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local member = ARGV[1]
local label, parent = "", ""
if ARGV[6] == "1" then label = KEYS[5] end
if ARGV[7] == "1" then parent = KEYS[6] end
-- the indexes this write keeps (a ZADD below moves the member's score; nothing to take out first)
local keep = { KEYS[3], KEYS[4], label, parent }
if cur[2] then
  local ix = cjson.decode(cur[2])
  -- the same sessionId: the HSET below writes the same field again
  if ix[1] ~= ARGV[4] and redis.call("HGET", KEYS[2], ix[1]) == member then
    redis.call("HDEL", KEYS[2], ix[1])
  end
  for i = 2, 5 do
    if ix[i] ~= "" and ix[i] ~= keep[i - 1] then redis.call("ZREM", ix[i], member) end
  end
end
local score = ARGV[3]
redis.call("HSET", KEYS[2], ARGV[4], member)
redis.call("ZADD", KEYS[3], score, member)
redis.call("ZADD", KEYS[4], score, member)
if label ~= "" then redis.call("ZADD", label, score, member) end
if parent ~= "" then redis.call("ZADD", parent, score, member) end
rev = rev + 1
redis.call("HSET", KEYS[1], "data", ARGV[2], "rev", rev,
  "ix", cjson.encode({ ARGV[4], KEYS[3], KEYS[4], label, parent }))
return rev
`,
};
