import type { ScriptDef } from "../scripts.js";

/**
 * releaseOutbox-1 — drops a claim so a retry may send; never drops a completed record.
 *
 * KEYS[1] outbox record           P:outbox:<id>
 * ARGV[1] unused (kept for callers of the first version)
 * Returns 1 when a claim or lease was released, 0 otherwise.
 */
export const releaseOutbox: ScriptDef = {
  name: "releaseOutbox-1",
  numberOfKeys: 1,
  lua: `
local raw = redis.call("GET", KEYS[1])
if not raw then return 0 end
local ok, rec = pcall(cjson.decode, raw)
if ok and type(rec) == "table" and rec.state == "claimed" then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
`,
};
