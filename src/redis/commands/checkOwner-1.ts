import type { ScriptDef } from "../scripts.js";

/**
 * checkOwner-1: fencing before a turn's final write.
 * KEYS: lock. ARGV: token, cancelPrefix, runId1, runId2, …
 * Reply: {owner (1|0), cancel reason of the first flagged run or ""}.
 */
export const checkOwner: ScriptDef = {
  name: "checkOwner-1",
  numberOfKeys: 1,
  lua: `
local owner = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then owner = 1 end
local flag = ""
for i = 3, #ARGV do
  local f = redis.call("GET", ARGV[2] .. ARGV[i])
  if f then flag = f break end
end
return {owner, flag}
`,
};
