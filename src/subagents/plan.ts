import type { Config } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import { bindingSettings, defaultSpawnContext, type ThreadSite } from "../routing/thread-bindings.js";
import type { Services } from "../services/index.js";
import { routeOf } from "../sessions/route.js";
import type { ThinkingLevel } from "../store/types.js";
import { validateAttachments } from "./attachments.js";
import { isSandboxedAgent, refusedByLimits, refusedBySandbox, subagentSettings } from "./limits.js";
import {
  type Checked,
  failed,
  forbidden,
  refuse,
  type SpawnArgs,
  type SpawnCtx,
  type SpawnResult,
} from "./types.js";

/**
 * The spawn plan: every check `sessions_spawn` makes (SEMANTICS §3: depth, children cap, agent
 * allow-list, model/thinking, mode/thread, sandbox, attachments) runs here, before anything is
 * created; `planSpawn` returns the refusal or the plan that apply.ts carries out.
 */

export const THINKING_LEVELS: readonly ThinkingLevel[] = ["off", "minimal", "low", "medium", "high"];

/**
 * Everything `sessions_spawn` decided before touching anything: the outcome of every check. Built by
 * `planSpawn` (reads only), carried out by `applySpawn` (writes, with an undo list).
 */
export interface SpawnPlan {
  args: SpawnArgs;
  targetAgent: string;
  targetSandboxed: boolean;
  modelRef?: string;
  thinking?: ThinkingLevel;
  mode: "run" | "session";
  cleanup: "delete" | "keep";
  context: "isolated" | "fork";
  /** Set for `thread: true`: where to create the thread. */
  thread?: ThreadSite;
  files?: Extract<ReturnType<typeof validateAttachments>, { ok: true }>;
  depth: number;
  maxDepth: number;
  runTimeoutSeconds: number;
}

/** The `model` override (resolved, allowed) and the `thinking` level. */
function modelChoices(
  args: SpawnArgs,
  models: Services["models"],
): Checked<{ modelRef?: string; thinking?: ThinkingLevel }> {
  let modelRef: string | undefined;
  if (args.model !== undefined) {
    try {
      modelRef = models.resolve(args.model).ref;
    } catch (err) {
      return refuse(failed(`model: ${errorMessage(err)}`));
    }
    if (!models.isAllowed(modelRef))
      return refuse(failed(`model: ${modelRef} is not allowed (models.allowed)`));
  }
  let thinking: ThinkingLevel | undefined;
  if (args.thinking !== undefined) {
    thinking = THINKING_LEVELS.find((l) => l === args.thinking);
    if (!thinking)
      return refuse(
        failed(`thinking: invalid level "${args.thinking}"; use one of: ${THINKING_LEVELS.join(", ")}`),
      );
  }
  return { ok: true, value: { ...(modelRef ? { modelRef } : {}), ...(thinking ? { thinking } : {}) } };
}

/** `thread: true`: bindings enabled, a chat to create the thread in, a channel that creates threads. */
function threadPlanOf(
  services: Pick<Services, "config" | "channels">,
  route: ReturnType<typeof routeOf>,
): Checked<NonNullable<SpawnPlan["thread"]>> {
  if (!route) return refuse(failed("thread: this session has no chat to create a thread in"));
  const bindings = bindingSettings(services.config, route.channel);
  if (!bindings.enabled)
    return refuse(failed(`thread: thread bindings are disabled (${bindings.enabledBy})`));
  const adapter = services.channels.get(route.channel, route.accountId);
  if (!adapter?.createThread || !adapter.capabilities.createThread)
    return refuse(
      failed(`thread: channel ${route.channel} cannot create threads; spawn without thread: true`),
    );
  return {
    ok: true,
    value: {
      adapter: { accountId: adapter.accountId, createThread: adapter.createThread.bind(adapter) },
      route,
    },
  };
}

/** The attachments, checked against `tools.sessions_spawn.attachments`; undefined when there are none. */
function filesOf(
  config: Config,
  attachments: NonNullable<SpawnArgs["attachments"]>,
): Checked<SpawnPlan["files"]> {
  if (attachments.length === 0) return { ok: true, value: undefined };
  const attachCfg = config.tools.sessions_spawn.attachments;
  if (!attachCfg.enabled)
    return refuse(forbidden("attachments are disabled (tools.sessions_spawn.attachments.enabled)"));
  const v = validateAttachments(attachments, attachCfg);
  if (!v.ok) return refuse({ status: "error", code: v.code, error: v.error });
  return { ok: true, value: v };
}

/** Runs every check; nothing is created. The result is either the refusal to return or the plan. */
export async function planSpawn(
  args: SpawnArgs,
  ctx: Pick<SpawnCtx, "services" | "caller">,
): Promise<{ ok: false; result: SpawnResult } | { ok: true; plan: SpawnPlan }> {
  const { services, caller } = ctx;
  const cfg = services.config;
  const targetAgent = args.agentId ?? caller.agentId;
  const limited = await refusedByLimits(args, ctx, targetAgent);
  if (limited) return refuse(limited);
  const choices = modelChoices(args, services.models);
  if (!choices.ok) return choices;
  const thread = args.thread === true;
  if (args.mode === "session" && !thread) return refuse(failed('mode: "session" requires thread: true'));
  const mode = args.mode ?? (thread ? "session" : "run");
  const cleanup = thread ? "keep" : (args.cleanup ?? "keep");
  const route = routeOf(caller.entry);
  let threadPlan: SpawnPlan["thread"];
  if (thread) {
    const t = threadPlanOf(services, route);
    if (!t.ok) return t;
    threadPlan = t.value;
  }
  const targetSandboxed = isSandboxedAgent(cfg, targetAgent);
  const sandbox = refusedBySandbox(args, caller, targetAgent, targetSandboxed);
  if (sandbox) return refuse(sandbox);
  const files = filesOf(cfg, args.attachments ?? []);
  if (!files.ok) return files;
  return {
    ok: true,
    plan: {
      args,
      targetAgent,
      targetSandboxed,
      ...choices.value,
      mode,
      cleanup,
      context: args.context ?? defaultSpawnContext(cfg, thread, route?.channel),
      ...(threadPlan ? { thread: threadPlan } : {}),
      ...(files.value ? { files: files.value } : {}),
      depth: caller.depth + 1,
      maxDepth: subagentSettings(cfg, targetAgent).maxSpawnDepth,
      runTimeoutSeconds: args.runTimeoutSeconds ?? subagentSettings(cfg, caller.agentId).runTimeoutSeconds,
    },
  };
}
