import { z } from "zod";
import type { Services } from "../services/index.js";
import type { SessionEntry } from "../store/types.js";
import { buildHistoryView, type HistoryView } from "./view.js";

/**
 * The history read shared by the `sessions_history` tool and the RPC `sessions.history`: the
 * bounded, redacted view of a transcript's tail. The tool adds the caller's visibility check; the
 * RPC is the operator view and resolves the session itself.
 */

export const HISTORY_DEFAULT_LIMIT = 50;
export const HISTORY_MAX_LIMIT = 500;

export const sessionsHistorySchema = z.strictObject({
  sessionKey: z
    .string()
    .min(1)
    .describe(
      'Session key from sessions_list, "main" (your agent\'s main session), "current" (yourself) or a sessionId.',
    ),
  limit: z
    .number()
    .min(0)
    .optional()
    .describe(
      `How many of the newest messages to read (default ${HISTORY_DEFAULT_LIMIT}; clamped to 1..${HISTORY_MAX_LIMIT}).`,
    ),
  includeTools: z.boolean().optional().describe("Include tool calls and tool results (default false)."),
});

/** Out-of-range limits are clamped to the server's bounds, as sessions_list does (SEMANTICS §3). */
export function clampHistoryLimit(limit: number | undefined): number {
  if (limit === undefined || !Number.isFinite(limit)) return HISTORY_DEFAULT_LIMIT;
  return Math.min(HISTORY_MAX_LIMIT, Math.max(1, Math.floor(limit)));
}

export type HistoryResult = { sessionKey: string } & HistoryView;

/** The safe view of `entry`'s newest messages; `shownKey` is how the key is displayed (default: the full key). */
export async function readHistory(
  services: Pick<Services, "store">,
  entry: SessionEntry,
  opts: { limit?: number | undefined; includeTools?: boolean | undefined },
  shownKey: string = entry.key,
): Promise<HistoryResult> {
  const includeTools = opts.includeTools ?? false;
  const tail = await services.store.transcripts.readTail(
    { agentId: entry.agentId, sessionId: entry.sessionId },
    { limit: clampHistoryLimit(opts.limit), includeTools },
  );
  return { sessionKey: shownKey, ...buildHistoryView(tail, { includeTools }) };
}
