import type { ScriptDef } from "../scripts.js";

/**
 * streamTail-1 — a page of a transcript stream and the stream's length, read in one step (what
 * the transcript tail cache is filled from and brought up to date with).
 *
 * KEYS[1] transcript stream       P:tr:<agentId>:<sessionId>
 * ARGV[1] "after": the entries after id ARGV[2], oldest first (XRANGE (ARGV[2] +);
 *         "newest": the newest entries, newest first (XREVRANGE + -)
 * ARGV[3] at most this many entries
 * Returns { entries, length }: entries as XRANGE returns them ([id, [field, value, …]]).
 */
export const streamTail: ScriptDef = {
  name: "streamTail-1",
  numberOfKeys: 1,
  lua: `
local page
if ARGV[1] == "after" then
  page = redis.call("XRANGE", KEYS[1], "(" .. ARGV[2], "+", "COUNT", ARGV[3])
else
  page = redis.call("XREVRANGE", KEYS[1], "+", "-", "COUNT", ARGV[3])
end
return { page, redis.call("XLEN", KEYS[1]) }
`,
};
