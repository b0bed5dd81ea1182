import { z } from "zod";
import { KV_YIELDED } from "../store/kv-namespaces.js";
import { defineTool } from "./types.js";

/**
 * `sessions_yield` (SEMANTICS §3): end the current turn on purpose so that the next input is a
 * pending sub-agent completion. The session is marked as waiting, so the next completion announce
 * also starts a turn for it (subagents/wake.ts) instead of only landing in its chat and transcript.
 */

const schema = z.strictObject({
  reason: z
    .string()
    .trim()
    .max(1000)
    .optional()
    .describe("Why the turn ends here (e.g. waiting for sub-agents)."),
});

export const sessionsYieldTool = defineTool({
  name: "sessions_yield",
  description:
    "End your turn now and wait: the next thing you receive is the completion of a sub-agent you spawned. Use after sessions_spawn instead of polling.",
  schema: () => schema,
  async execute(args, ctx) {
    if (!ctx.yieldTurn) {
      return {
        status: "error",
        error: "sessions_yield needs a running model turn; there is none for this call",
      };
    }
    const message = args.reason || "Turn yielded.";
    await ctx.services.store.kv.set(KV_YIELDED, ctx.caller.sessionKey, {
      at: ctx.services.now(),
      ...(ctx.caller.runId ? { runId: ctx.caller.runId } : {}),
    });
    ctx.yieldTurn(message);
    return { status: "yielded", message };
  },
});
