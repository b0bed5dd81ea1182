import { createHash } from "node:crypto";
import type { Redis } from "ioredis";

/**
 * The driver's multi-key Redis changes, each one atomic Lua script named after its operation and
 * key count (habit 15). Keys come from `keys.ts`; all share one hash tag, so the run/cancel keys a
 * script derives from a prefix argument live in the same Cluster slot as its declared keys.
 *
 * Run states (`st` in `{tag}:run:<id>`): q = in the mailbox, a = taken into a turn, d = finished,
 * x = cancelled while queued.
 */

export class Script {
  private readonly sha: string;

  constructor(
    readonly name: string,
    readonly numberOfKeys: number,
    private readonly source: string,
  ) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }

  async run(redis: Redis, keys: string[], args: Array<string | number>): Promise<unknown> {
    if (keys.length !== this.numberOfKeys) {
      throw new Error(`script ${this.name}: expected ${this.numberOfKeys} keys, got ${keys.length}`);
    }
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}

/**
 * submitTurn-4: accept a run into its session's mailbox.
 * KEYS: run, mailbox, dirty, sched. ARGV: runId, sessionKey, envelope JSON.
 * Returns 0 when the runId is already known (duplicate submit); 1 when accepted and the caller
 * must add a drain job; 2 when accepted and a drain job is already scheduled (`sched` is set from
 * a producer's add until a drain job sees the mailbox empty — takeTurn/ackTurn clear it then).
 */
export const submitTurn4 = new Script(
  "submitTurn-4",
  4,
  `
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], "s", ARGV[2], "st", "q", "env", ARGV[3])
redis.call("RPUSH", KEYS[2], ARGV[1])
redis.call("SADD", KEYS[3], ARGV[2])
if redis.call("SET", KEYS[4], "1", "NX") then return 1 end
return 2
`,
);

/**
 * takeTurn-3: the drain job of a session takes its next turn.
 * KEYS: act, mailbox, sched. ARGV: jobId, runPrefix, cancelPrefix, jobPrefix, peekWindow.
 * - A turn already in `act` (its worker crashed, stalled or handed it back) is resumed with
 *   attempt + 1 — unless another live drain job (its lock key exists) owns it: "busy".
 * - Else the mailbox head is popped into `act` (attempt 1) and marked taken; an empty mailbox
 *   clears `sched` (the next producer adds a drain job again).
 * Reply: {"empty"} | {"busy"} | {kind, attempt, n, id1, env1, flag1, …, idn, envn, flagn, peek…}
 * where kind is "new" or "resume", flag is the cancel reason or "", and `peek` (only for "new"
 * with peekWindow > 0) is up to peekWindow pairs id, env of the messages behind the head.
 */
export const takeTurn3 = new Script(
  "takeTurn-3",
  3,
  `
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
local out = {kind, attempt, #ids}
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
);

/**
 * extendTurn-2 (collect mode): move the given runIds from the mailbox head into the turn in
 * `act`, in order, stopping at the first one that is no longer at the head (cancelled meanwhile).
 * KEYS: act, mailbox. ARGV: jobId, runPrefix, id1, id2, …
 * Returns how many were taken (0 when `act` is not this job's).
 */
export const extendTurn2 = new Script(
  "extendTurn-2",
  2,
  `
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
);

/**
 * checkOwner-1: fencing before a turn's final write.
 * KEYS: lock. ARGV: token, cancelPrefix, runId1, runId2, …
 * Reply: {owner (1|0), cancel reason of the first flagged run or ""}.
 */
export const checkOwner1 = new Script(
  "checkOwner-1",
  1,
  `
local owner = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then owner = 1 end
local flag = ""
for i = 3, #ARGV do
  local f = redis.call("GET", ARGV[2] .. ARGV[i])
  if f then flag = f break end
end
return {owner, flag}
`,
);

/**
 * ackTurn-5: the turn's outcome is in the RunStore; retire it — only if this worker still holds
 * the job's lock (fencing: a worker that lost its lock must not clear its successor's turn).
 * KEYS: lock, act, mailbox, bus, sched. ARGV: token, runPrefix, retentionMs, event message
 * ("" = none), cancelPrefix, runId1, runId2, … (their cancel flags are dropped: the runs are final).
 * Returns the mailbox length (> 0: the drain job must re-enqueue itself; 0: `sched` is cleared and
 * the job ends), or -1 when not owner.
 */
export const ackTurn5 = new Script(
  "ackTurn-5",
  5,
  `
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return -1 end
redis.call("DEL", KEYS[2])
for i = 6, #ARGV do
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
);

/**
 * cancelRun-3: cancel from any process.
 * KEYS: run, mailbox (of the run's session), cancel flag. ARGV: runId, reason, flagTtlMs, retentionMs.
 * Returns "removed" (was queued: taken out of the mailbox, state x), "active" (running: the flag is
 * set, the caller broadcasts), or the final/unknown state ("d", "x", "gone", "none").
 */
export const cancelRun3 = new Script(
  "cancelRun-3",
  3,
  `
local st = redis.call("HGET", KEYS[1], "st")
if st == "q" then
  if redis.call("LREM", KEYS[2], 1, ARGV[1]) == 1 then
    redis.call("HSET", KEYS[1], "st", "x")
    redis.call("HDEL", KEYS[1], "env")
    redis.call("PEXPIRE", KEYS[1], ARGV[4])
    return "removed"
  end
  return "gone"
end
if st == "a" then
  redis.call("SET", KEYS[3], ARGV[2], "PX", ARGV[3])
  return "active"
end
return st or "none"
`,
);

/**
 * sweepSession-3: the sweeper's check of one dirty session.
 * KEYS: mailbox, act, dirty. ARGV: sessionKey.
 * Returns 1 when the session needs a drain job; 0 (and forgets it) when it is idle.
 */
export const sweepSession3 = new Script(
  "sweepSession-3",
  3,
  `
if redis.call("LLEN", KEYS[1]) == 0 and redis.call("EXISTS", KEYS[2]) == 0 then
  redis.call("SREM", KEYS[3], ARGV[1])
  return 0
end
return 1
`,
);
