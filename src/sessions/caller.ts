import type { SessionEntry } from "../store/types.js";

/** Who calls a session tool: the session (and run) the call is made as, with its depth and sandbox. */
export interface ToolCaller {
  sessionKey: string;
  agentId: string;
  entry: SessionEntry;
  /** Run the call happens in (absent for operator `tools.invoke`). */
  runId?: string;
  /** 0 for main/top-level sessions. */
  depth: number;
  sandboxed: boolean;
}
