import type { ScriptDef } from "../scripts.js";

/**
 * archiveTranscript-3 — renames a live transcript stream out of the live set (kept, not
 * destroyed), never overwriting an earlier archive.
 *
 * KEYS[1] live stream             P:tr:<agentId>:<sessionId>
 * KEYS[2] archive name            <live stream>:archived:<reason>:<stamp>
 * KEYS[3] the live stream's ids   P:tr:<agentId>:<sessionId>:ids (dropped: a fresh transcript starts)
 * Returns 1 when renamed, 0 when there is no live stream, -1 when KEYS[2] is taken.
 */
export const archiveTranscript: ScriptDef = {
  name: "archiveTranscript-3",
  numberOfKeys: 3,
  lua: `
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
if redis.call("EXISTS", KEYS[2]) == 1 then return -1 end
redis.call("RENAME", KEYS[1], KEYS[2])
redis.call("DEL", KEYS[3])
return 1
`,
};
