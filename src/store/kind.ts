import type { SessionKind } from "./types.js";

/**
 * Default session-kind rule (SEMANTICS §1), used when the composition root does not inject
 * the routing module's classifier: main bucket; cron/hook/node by prefix (also agent-scoped);
 * group when it has `:group:` or `:channel:`; everything else (DMs, sub-agents) is other.
 */
export function defaultClassifyKind(key: string): SessionKind {
  if (key === "main" || key.endsWith(":main")) return "main";
  // allocation-free: this runs for every entry at start-up
  let rest = 0;
  if (key.startsWith("agent:")) {
    const colon = key.indexOf(":", 6);
    if (colon !== -1) rest = colon + 1;
  }
  if (key.startsWith("cron:") || key.startsWith("cron:", rest)) return "cron";
  if (key.startsWith("hook:") || key.startsWith("hook:", rest)) return "hook";
  if (key.startsWith("node-") || key.startsWith("node-", rest)) return "node";
  if (key.includes(":group:") || key.includes(":channel:")) return "group";
  return "other";
}
