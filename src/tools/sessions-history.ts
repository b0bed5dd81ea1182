import { readHistory, sessionsHistorySchema } from "../history/read.js";
import { resolveVisibleTarget } from "../policy/access.js";
import { displayKey } from "../sessions/keys.js";
import { defineTool } from "./types.js";

/** `sessions_history` (SEMANTICS.md §3): the caller's visibility check, then the shared history read. */

export const sessionsHistoryTool = defineTool({
  name: "sessions_history",
  description:
    "Read the newest messages of a session you can see (secrets redacted, long text cut, tool messages left out unless includeTools). " +
    "Use keys from sessions_list.",
  schema: () => sessionsHistorySchema,
  async execute(args, { services, caller }) {
    const target = await resolveVisibleTarget(services, caller, args.sessionKey);
    if (!target.ok) {
      // Echo the argument, not the resolved key: a sessionId must not reveal an invisible session's key.
      return { status: target.result.status, error: target.result.error, sessionKey: args.sessionKey };
    }
    return {
      ...(await readHistory(services, target.entry, args, displayKey(target.entry.key, caller.agentId))),
    };
  },
});
