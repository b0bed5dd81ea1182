import type { ScriptDef } from "../scripts.js";

/**
 * completeOutbox-1 — records a completed send, keeping the claim's expiry when there is one.
 *
 * KEYS[1] outbox record           P:outbox:<id>
 * ARGV[1] completed record JSON
 * ARGV[2] TTL in ms when there was no live claim
 * ARGV[3] TTL in ms of the mark from now ("" = keep the claim's expiry)
 * Returns 1.
 */
export const completeOutbox: ScriptDef = {
  name: "completeOutbox-1",
  numberOfKeys: 1,
  lua: `
if ARGV[3] ~= nil and ARGV[3] ~= "" then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[3])
elseif redis.call("EXISTS", KEYS[1]) == 1 then
  redis.call("SET", KEYS[1], ARGV[1], "KEEPTTL")
else
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
end
return 1
`,
};
