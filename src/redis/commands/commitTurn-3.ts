import type { ScriptDef } from "../scripts.js";

/**
 * commitTurn-3: the commit of a turn that caused follow-ups (transactional outbox) — its final
 * outcome and its follow-ups in ONE atomic step, only if this worker still holds the job's lock.
 * KEYS: lock, act, outbox. ARGV: token, final JSON ({ result, outbox: [entry, …] }), entry1, entry2, …
 * The outcome goes on the turn in flight (`act.final`: a worker that resumes the turn applies it
 * instead of running the turn again); each entry (a follow-up as JSON) is pushed onto the outbox
 * list, from which the relay submits it (idempotent by its id) and then removes it.
 * Returns 1, or -1 when not owner (nothing written).
 */
export const commitTurn: ScriptDef = {
  name: "commitTurn-3",
  numberOfKeys: 3,
  lua: `
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call("EXISTS", KEYS[2]) == 0 then return -1 end
redis.call("HSET", KEYS[2], "final", ARGV[2])
for i = 3, #ARGV do redis.call("RPUSH", KEYS[3], ARGV[i]) end
return 1
`,
};
