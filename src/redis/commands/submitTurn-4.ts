import type { ScriptDef } from "../scripts.js";

/**
 * submitTurn-4: accept a run into its session's mailbox.
 * KEYS: run, mailbox, dirty, sched. ARGV: runId, sessionKey, envelope JSON.
 * Returns 0 when the runId is already known (duplicate submit); 1 when accepted and the caller
 * must add a drain job; 2 when accepted and a drain job is already scheduled (`sched` is set from
 * a producer's add until a drain job sees the mailbox empty — takeTurn/ackTurn clear it then).
 */
export const submitTurn: ScriptDef = {
  name: "submitTurn-4",
  numberOfKeys: 4,
  lua: `
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], "s", ARGV[2], "st", "q", "env", ARGV[3])
redis.call("RPUSH", KEYS[2], ARGV[1])
redis.call("SADD", KEYS[3], ARGV[2])
if redis.call("SET", KEYS[4], "1", "NX") then return 1 end
return 2
`,
};
