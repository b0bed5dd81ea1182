import { agentsListTool } from "./agents-list.js";
import { cronTool } from "./cron.js";
import { messageTool } from "./message.js";
import { sessionStatusTool } from "./session-status.js";
import { sessionsHistoryTool } from "./sessions-history.js";
import { sessionsListTool } from "./sessions-list.js";
import { sessionsSendTool } from "./sessions-send.js";
import { sessionsSpawnTool } from "./sessions-spawn.js";
import { sessionsYieldTool } from "./sessions-yield.js";
import { subagentsTool } from "./subagents.js";
import type { SessionTool } from "./types.js";

/** Every session tool, one file each (API.md §5, SEMANTICS.md §3). */
export function allTools(): SessionTool[] {
  return [
    sessionsListTool,
    sessionsHistoryTool,
    sessionsSendTool,
    sessionsSpawnTool,
    sessionsYieldTool,
    subagentsTool,
    sessionStatusTool,
    agentsListTool,
    cronTool,
    messageTool,
  ];
}
