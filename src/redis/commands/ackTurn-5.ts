import type { ScriptDef } from "../scripts.js";

/**
 * ackTurn-5: the turn's outcome is in the RunStore; retire it — only if this worker still holds
 * the job's lock (fencing: a worker that lost its lock must not clear its successor's turn).
 * KEYS: lock, act, mailbox, run-events channel, sched. ARGV: token, runPrefix, retentionMs, event message
 * ("" = none), cancelPrefix, drop lock ("1": a direct turn's lock, which no BullMQ job removes),
 * runId1, runId2, … (their cancel flags are dropped: the runs are final).
 * Returns the mailbox length (> 0: the drain job must re-enqueue itself; 0: `sched` is cleared and
 * the job ends), or -1 when not owner.
 */
export const ackTurn: ScriptDef = {
  name: "ackTurn-5",
  numberOfKeys: 5,
  lua: `
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return -1 end
redis.call("DEL", KEYS[2])
if ARGV[6] == "1" then redis.call("DEL", KEYS[1]) end
for i = 7, #ARGV do
  redis.call("HSET", ARGV[2] .. ARGV[i], "st", "d")
  redis.call("HDEL", ARGV[2] .. ARGV[i], "env")
  redis.call("PEXPIRE", ARGV[2] .. ARGV[i], ARGV[3])
  redis.call("DEL", ARGV[5] .. ARGV[i])
end
if ARGV[4] ~= "" then redis.call("PUBLISH", KEYS[4], ARGV[4]) end
local left = redis.call("LLEN", KEYS[3])
if left == 0 then redis.call("DEL", KEYS[5]) end
return left
`,
};
