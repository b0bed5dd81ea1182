import type { z } from "zod";
import type { Services } from "../services/index.js";
import type { ToolCaller } from "../sessions/caller.js";

export type { ToolCaller };

/**
 * A session tool: one file each under `src/tools/`. The zod schema is both the validator of
 * model/RPC args and (via z.toJSONSchema) the JSON schema the model sees. Business outcomes are
 * returned as `status` values; schema violations never reach `execute`.
 */

export interface ToolContext {
  services: Services;
  caller: ToolCaller;
  signal: AbortSignal;
  /**
   * Present while a model turn runs: the deterministic id of this tool call (`<runId>:s<step>:c<j>`),
   * the same when the turn is re-run after a crash. Tools with side effects derive their ids
   * from it (a spawned run, a sent message), so a re-run does not do them twice.
   */
  effectId?: string;
  /** Present while a model turn runs: ends the turn after this tool call (sessions_yield). */
  yieldTurn?: (reason: string) => void;
  /**
   * The tool call's `switchboard.tool` span (W3C traceparent) while a turn runs with tracing on
   * (telemetry/trace.ts): what the tool delivers is its child (`DeliveryRequest.traceparent`), a
   * turn it submits links to it (`linkMeta`).
   */
  traceparent?: string | undefined;
}

export type ToolResult = Record<string, unknown>;

export interface SessionTool<S extends z.ZodType = z.ZodType> {
  name: string;
  /** What the model reads to decide how to use it. */
  description: string;
  /** The args schema; may depend on the caller (sessions_spawn lists the agent ids it may use). */
  schema: (ctx: Pick<ToolContext, "services" | "caller">) => S;
  execute(args: z.infer<S>, ctx: ToolContext): Promise<ToolResult>;
  /**
   * Optional: the parsed raw args as they may be stored in the caller's transcript (e.g. sessions_spawn
   * leaves attachment contents out). Default: stored unchanged.
   */
  transcriptArgs?(args: unknown): unknown;
  /** The MCP server a bridged tool comes from (absent for the session tools). */
  server?: string;
  /** The tool's MCP annotations; `readOnlyHint` lets `tools.approvals.default: "auto"` run it unasked. */
  annotations?: { readOnlyHint?: boolean };
}

/** Helper so each tool file keeps its arg types without casts. */
export function defineTool<S extends z.ZodType>(tool: SessionTool<S>): SessionTool {
  return tool as unknown as SessionTool;
}
