import type { ScriptDef } from "../scripts.js";

/**
 * appendTranscript-2 — appends one message to a transcript stream unless a message with the
 * same id is already in it (API.md §6: appending an existing id is a no-op), in one step.
 *
 * KEYS[1] transcript stream       P:tr:<agentId>:<sessionId>
 * KEYS[2] its message ids         P:tr:<agentId>:<sessionId>:ids (set)
 * ARGV[1] message id, ARGV[2] role, ARGV[3] message JSON
 * Returns 1 when appended, 0 when the id was already there.
 */
export const appendTranscript: ScriptDef = {
  name: "appendTranscript-2",
  numberOfKeys: 2,
  lua: `
if redis.call("SADD", KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call("XADD", KEYS[1], "*", "r", ARGV[2], "m", ARGV[3])
return 1
`,
};
