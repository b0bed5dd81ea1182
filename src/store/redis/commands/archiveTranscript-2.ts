import type { ScriptDef } from "../scripts.js";

/**
 * archiveTranscript-2 — renames a live transcript stream out of the live set (kept, not
 * destroyed), never overwriting an earlier archive.
 *
 * KEYS[1] live stream             P:tr:<agentId>:<sessionId>
 * KEYS[2] archive name            <live stream>:archived:<reason>:<stamp>
 * Returns 1 when renamed, 0 when there is no live stream, -1 when KEYS[2] is taken.
 */
export const archiveTranscript: ScriptDef = {
  name: "archiveTranscript-2",
  numberOfKeys: 2,
  lua: `
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
if redis.call("EXISTS", KEYS[2]) == 1 then return -1 end
redis.call("RENAME", KEYS[1], KEYS[2])
return 1
`,
};
