import { z } from "zod";
import type { Services } from "../services/index.js";
import { type ChildRun, indexed, loadChildren } from "../subagents/children.js";
import { kill } from "../subagents/kill.js";
import { steer } from "../subagents/steer.js";
import { defineTool, type ToolContext, type ToolResult } from "./types.js";

/**
 * `subagents` (SEMANTICS §3): list, kill (with descendants) and steer the caller's own children.
 * The children and their index order are src/subagents/children.ts; kill and steer are
 * src/subagents/kill.ts and steer.ts.
 */

const STEER_MAX_CHARS = 4000;
const TASK_PREVIEW_CHARS = 72;

const schema = z.strictObject({
  action: z.enum(["list", "steer", "kill"]).default("list").describe("list (default), steer or kill."),
  target: z
    .string()
    .trim()
    .min(1)
    .max(1024)
    .optional()
    .describe(
      'Which child: "last", a 1-based index from list, a child session key, a label, a runId prefix, or "all" (kill).',
    ),
  message: z
    .string()
    .trim()
    .min(1)
    .max(STEER_MAX_CHARS)
    .optional()
    .describe("steer: guidance for the running child."),
});

type Args = z.infer<typeof schema>;

function view(services: Services, c: ChildRun, index: number, now: number) {
  const run = c.run;
  const started = run?.startedAt;
  const task = c.entry.subagent?.task ?? "";
  // A run records its model once it has called one; until then it is the child's own (override or agent default).
  const model =
    run?.model ?? c.entry.model ?? c.entry.lastModel ?? services.models.modelFor(c.entry.agentId, c.entry);
  return {
    index,
    runId: c.entry.subagent?.runId ?? "",
    sessionKey: c.entry.key,
    ...(c.entry.label ? { label: c.entry.label } : {}),
    task: task.length > TASK_PREVIEW_CHARS ? `${task.slice(0, TASK_PREVIEW_CHARS - 1)}…` : task,
    status: run?.status ?? c.entry.subagent?.outcome ?? "unknown",
    runtimeMs: started === undefined ? 0 : Math.max(0, (run?.endedAt ?? now) - started),
    model,
    totalTokens: run?.usage ? run.usage.input + run.usage.output : 0,
    ...(c.entry.archivedAt !== undefined ? { archived: true } : {}),
    ...(c.entry.threadBinding
      ? { thread: { channel: c.entry.threadBinding.channel, threadId: c.entry.threadBinding.threadId } }
      : {}),
  };
}

async function execute(args: Args, ctx: ToolContext): Promise<ToolResult> {
  const { services, caller } = ctx;
  const children = await loadChildren(services, caller.sessionKey);
  if (args.action === "kill") return kill(args, ctx, children);
  if (args.action === "steer") return steer(args, ctx, children);
  const now = services.now();
  const { active, recent } = indexed(children, now);
  return {
    status: "ok",
    action: "list",
    active: active.map((c, i) => view(services, c, i + 1, now)),
    recent: recent.map((c, i) => view(services, c, active.length + i + 1, now)),
    total: children.length,
  };
}

export const subagentsTool = defineTool({
  name: "subagents",
  description:
    "List, steer or kill the sub-agents this session spawned. list shows active and recent (30 min) runs; steer sends guidance to a running one; kill aborts one (or all) and everything it spawned.",
  schema: () => schema,
  execute,
});
