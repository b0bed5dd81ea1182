import type { ScriptDef } from "../scripts.js";

/**
 * appendTranscript-2 — appends one message to a transcript stream unless a message with the
 * same id is already in it (API.md §6: appending an existing id is a no-op), in one step.
 *
 * KEYS[1] transcript stream       P:tr:<agentId>:<sessionId>
 * KEYS[2] its message ids         P:tr:<agentId>:<sessionId>:ids (set)
 * ARGV[1] message id, ARGV[2] role, ARGV[3] message JSON
 * ARGV[4] (optional) the newest entry id the caller's cached tail holds; ARGV[5] at most this
 *         many entries to return
 * Returns 1 when appended, 0 when the id was already there. With ARGV[4], an append returns
 * { 1, new entry id, entries after ARGV[4] and before the new one (oldest first, as XRANGE
 * returns them), the stream's length }: what the cached tail needs to take the new message
 * without another round trip.
 */
export const appendTranscript: ScriptDef = {
  name: "appendTranscript-2",
  numberOfKeys: 2,
  lua: `
if redis.call("SADD", KEYS[2], ARGV[1]) == 0 then return 0 end
local id = redis.call("XADD", KEYS[1], "*", "r", ARGV[2], "m", ARGV[3])
if not ARGV[4] then return 1 end
local page = redis.call("XRANGE", KEYS[1], "(" .. ARGV[4], "(" .. id, "COUNT", ARGV[5])
return { 1, id, page, redis.call("XLEN", KEYS[1]) }
`,
};
