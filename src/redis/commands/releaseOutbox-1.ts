import type { ScriptDef } from "../scripts.js";

/**
 * releaseOutbox-1 — drops a claim so a retry may send; never drops a completed record.
 *
 * KEYS[1] outbox record           P:outbox:<id>
 * ARGV[1] the claimed-record value
 * Returns 1 when a claim was released, 0 otherwise.
 */
export const releaseOutbox: ScriptDef = {
  name: "releaseOutbox-1",
  numberOfKeys: 1,
  lua: `
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
`,
};
