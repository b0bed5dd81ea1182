import { z } from "zod";
import type { Services } from "../services/index.js";
import { applySpawn } from "../subagents/apply.js";
import { attachmentDigests } from "../subagents/attachments.js";
import { spawnableAgentIds } from "../subagents/limits.js";
import { planSpawn, THINKING_LEVELS } from "../subagents/plan.js";
import { defineTool, type ToolCaller } from "./types.js";

/**
 * `sessions_spawn` (SEMANTICS §3): start a background sub-agent in a new child session and return
 * at once. The checks are the spawn plan (src/subagents/plan.ts), the side effects its apply
 * (src/subagents/apply.ts); the completion announce is src/subagents/flow.ts.
 */

const TASK_MAX_CHARS = 32_000;

const attachmentSchema = z.strictObject({
  name: z.string().describe("File name (no path separators)."),
  content: z.string().describe("File content: text, or base64 when encoding is base64."),
  encoding: z.enum(["utf8", "base64"]).optional().describe("Default utf8."),
  mimeType: z.string().max(200).optional(),
});

function spawnSchema(ctx: { services: Services; caller: ToolCaller }) {
  const allowed = spawnableAgentIds(ctx.services.config, ctx.caller.agentId);
  return z.strictObject({
    task: z
      .string()
      .trim()
      .min(1)
      .max(TASK_MAX_CHARS)
      .describe("What the sub-agent should do, self-contained."),
    label: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .optional()
      .describe("Short name for the sub-agent (shown in lists and the announce)."),
    agentId: z
      .string()
      .trim()
      .toLowerCase()
      .meta({
        enum: allowed,
        description: `Agent to run the sub-agent as; one of: ${allowed.join(", ")}. Default: your own agent.`,
      })
      .optional(),
    model: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .optional()
      .describe('Model override "<provider>/<model>" (must be allowed by models.allowed).'),
    thinking: z
      .string()
      .trim()
      .toLowerCase()
      .meta({ enum: [...THINKING_LEVELS], description: "Thinking level for the sub-agent." })
      .optional(),
    runTimeoutSeconds: z
      .number()
      .min(0)
      .optional()
      .describe("Abort the run after this many seconds (0 = no limit)."),
    thread: z
      .boolean()
      .optional()
      .describe("Bind the sub-agent to a new thread in this chat (needs a channel with threads)."),
    mode: z
      .enum(["run", "session"])
      .optional()
      .describe('"run" = one task (default); "session" = stays in its thread (needs thread: true).'),
    cleanup: z
      .enum(["delete", "keep"])
      .optional()
      .describe('"keep" (default) archives the child later; "delete" removes it after the announce.'),
    sandbox: z
      .enum(["inherit", "require"])
      .optional()
      .describe('"require" refuses to spawn an unsandboxed sub-agent.'),
    attachments: z
      .array(attachmentSchema)
      .optional()
      .describe("Files written into the sub-agent's workspace (if enabled)."),
    attachAs: z.strictObject({ mountPath: z.string().max(500).optional() }).optional(),
    context: z
      .enum(["isolated", "fork"])
      .optional()
      .describe(
        '"isolated" (default; "fork" for thread: true) or "fork": the child also sees your recent conversation.',
      ),
    runtime: z
      .enum(["subagent", "acp"])
      .optional()
      .describe('"subagent" (default): runs in this gateway. "acp" (external harness) is not supported.'),
  });
}

export const sessionsSpawnTool = defineTool({
  name: "sessions_spawn",
  description:
    "Start a background sub-agent for a task. Returns at once with status accepted; the sub-agent's result is announced back to this session when it finishes (never poll for it).",
  schema: spawnSchema,
  async execute(args, ctx) {
    const planned = await planSpawn(args, ctx);
    return planned.ok ? applySpawn(planned.plan, ctx) : planned.result;
  },
  /** Attachment contents never enter the caller's transcript: each becomes `{ name, bytes, sha256 }`. */
  transcriptArgs: attachmentDigests,
});
