import type { ScriptDef } from "../scripts.js";

/**
 * putRun-2 — writes one run record whole and files it under its session, atomically;
 * optionally only when it is still at an expected revision, or still exactly an expected JSON
 * (optimistic concurrency for patch: by revision when the writer knows it, by value when it only
 * knows what the record's first writer wrote).
 *
 * KEYS[1] run hash                 P:run:<runId>
 * KEYS[2] the session's run zset   P:runs:sess:<sessionKey>
 * ARGV[1] runId (the zset member)
 * ARGV[2] run JSON
 * ARGV[3] createdAt (the zset score)
 * ARGV[4] expected revision: "" = any, n = must still be n
 * ARGV[5] TTL in ms for the run hash, "0" = keep (finished runs may expire; see runs.ts)
 * ARGV[6] expected JSON: "" = any, else the stored `data` must equal it (ARGV[4] is then "")
 * Returns the new revision, or -1 when the expected revision or JSON did not match. A record's first
 * revision is the server's clock in µs (+ 1 per write after), so a record deleted or expired and
 * written again never repeats a revision of its earlier life: a writer holding an old revision fails.
 *
 * A previous write's zset (field ix, same hash tag) loses the member when the session changed.
 */
export const putRun: ScriptDef = {
  name: "putRun-2",
  numberOfKeys: 2,
  lua: `
local cur = redis.call("HMGET", KEYS[1], "rev", "ix")
local rev = tonumber(cur[1]) or 0
if ARGV[4] ~= "" and tonumber(ARGV[4]) ~= rev then return -1 end
if ARGV[6] ~= "" and redis.call("HGET", KEYS[1], "data") ~= ARGV[6] then return -1 end
if rev == 0 then
  -- a new record: its revisions start at the server's clock in µs (see above)
  local t = redis.call("TIME")
  rev = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if cur[2] and cur[2] ~= KEYS[2] then redis.call("ZREM", cur[2], ARGV[1]) end
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[1])
rev = rev + 1
redis.call("HSET", KEYS[1], "data", ARGV[2], "rev", rev, "ix", KEYS[2])
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  redis.call("PEXPIRE", KEYS[1], ttl)
else
  redis.call("PERSIST", KEYS[1])
end
return rev
`,
};
