import { randomUUID } from "node:crypto";
import { errorMessage } from "../errors.js";
import { uuidFrom } from "../ids.js";
import {
  bindThread,
  createThreadBinding,
  type ThreadBinding,
  threadBindingKey,
  unbindThread,
} from "../routing/thread-bindings.js";
import { deriveChannel, subagentKey } from "../sessions/keys.js";
import { KV_SPAWN_REQUESTS } from "../store/kv-namespaces.js";
import type { SessionEntry } from "../store/types.js";
import { linkMeta } from "../telemetry/index.js";
import { type AttachmentReceipt, type WrittenAttachments, writeAttachments } from "./attachments.js";
import { childWorkspace, type SpawnRequestRecord } from "./children.js";
import type { SpawnPlan } from "./plan.js";
import { attachInfoOf, childRequest, SESSION_NOTE, SPAWN_NOTE } from "./prompts.js";
import { failed, type SpawnCtx, type SpawnResult } from "./types.js";

/**
 * Carrying out a spawn plan (plan.ts): the side effects of `sessions_spawn`, in an order that can
 * be undone — thread, attachment folder, child entry, start request, thread binding, run — and a
 * failure undoes them. A re-run of the same tool call finds the child it already spawned.
 */

/** Undo steps of a spawn in progress, run newest first when a later step fails. */
class UndoList {
  readonly #steps: Array<() => Promise<unknown>> = [];
  push(step: () => Promise<unknown>): void {
    this.#steps.push(step);
  }
  async run(): Promise<void> {
    for (const step of this.#steps.reverse()) await step().catch(() => {});
  }
}

/** The child's session key, session id and run id. */
interface SpawnIds {
  childKey: string;
  sessionId: string;
  runId: string;
}

/**
 * Ids derive from the tool call's effect id when a turn runs it: a turn re-run after a crash
 * finds the child it already spawned and reports it again instead of spawning a second one.
 */
function spawnIds(targetAgent: string, seed: string | undefined): SpawnIds {
  return {
    childKey: subagentKey(targetAgent, seed ? uuidFrom(`${seed}:key`) : randomUUID()),
    sessionId: seed ? uuidFrom(`${seed}:session`) : randomUUID(),
    runId: seed ? uuidFrom(`${seed}:run`) : randomUUID(),
  };
}

/** Submits the child's run (the same submission for a first spawn and a re-run's resubmit). */
async function submitChild(
  ctx: SpawnCtx,
  targetAgent: string,
  ids: SpawnIds,
  request: SpawnRequestRecord,
): Promise<void> {
  const { caller } = ctx;
  await ctx.services.pipeline.submitTurn({
    sessionKey: ids.childKey,
    agentId: targetAgent,
    text: request.text,
    provenance: {
      kind: "inter_session",
      sourceSessionKey: caller.sessionKey,
      sourceTool: "sessions_spawn",
      // The same rule as sessions_send: the requester row's channel (SEMANTICS §1).
      sourceChannel: deriveChannel(caller.sessionKey, caller.entry),
    },
    deliver: false,
    origin: "spawn",
    extraSystem: request.extraSystem,
    timeoutMs: request.timeoutMs,
    runId: ids.runId,
    meta: { spawn: request.meta, ...linkMeta(ctx.traceparent) },
  });
}

/**
 * A re-run of the same tool call whose child already exists: its run is submitted again (a no-op
 * unless the first attempt died before its submit) and reported as accepted. null when it is new.
 */
async function resumeSpawn(ctx: SpawnCtx, plan: SpawnPlan, ids: SpawnIds): Promise<SpawnResult | null> {
  const { store } = ctx.services;
  const prior = await store.sessions.get(ids.childKey);
  const asked = await store.kv.get<SpawnRequestRecord>(KV_SPAWN_REQUESTS, ids.childKey);
  if (prior?.subagent?.runId !== ids.runId || !asked) return null;
  await submitChild(ctx, plan.targetAgent, ids, asked);
  const again: SpawnResult = {
    status: "accepted",
    runId: ids.runId,
    childSessionKey: ids.childKey,
    mode: plan.mode,
    note: SPAWN_NOTE,
  };
  if (prior.label) again.label = prior.label;
  if (prior.threadBinding) again.threadId = prior.threadBinding.threadId;
  return again;
}

/** The child's session row: lineage, overrides, the sub-agent record and, with a thread, its route. */
function childEntry(
  plan: SpawnPlan,
  ids: SpawnIds,
  requesterKey: string,
  now: number,
  binding: ThreadBinding | undefined,
): SessionEntry {
  const { args, mode } = plan;
  return {
    key: ids.childKey,
    sessionId: ids.sessionId,
    agentId: plan.targetAgent,
    createdAt: now,
    updatedAt: now,
    spawnedBy: requesterKey,
    spawnDepth: plan.depth,
    sandboxed: plan.targetSandboxed,
    ...(args.label ? { label: args.label } : {}),
    ...(plan.modelRef ? { model: plan.modelRef } : {}),
    ...(plan.thinking ? { thinkingLevel: plan.thinking } : {}),
    subagent: {
      task: args.task,
      runId: ids.runId,
      mode,
      cleanup: plan.cleanup,
      runTimeoutSeconds: plan.runTimeoutSeconds,
      sandboxed: plan.targetSandboxed,
      announcedRunId: "", // tracked: its requester's announce waits for this child's (subagents/announce.ts)
    },
    ...(binding
      ? {
          threadBinding: binding,
          channel: binding.channel,
          deliveryContext: {
            channel: binding.channel,
            to: binding.to,
            threadId: binding.threadId,
            ...(binding.accountId ? { accountId: binding.accountId } : {}),
          },
        }
      : {}),
  };
}

/**
 * Writes the entry, the request and the thread binding, then submits the run; each write pushes
 * its undo first. Throws when a step fails (the caller runs the undo list).
 */
async function persistAndSubmit(
  ctx: SpawnCtx,
  plan: SpawnPlan,
  ids: SpawnIds,
  entry: SessionEntry,
  request: SpawnRequestRecord,
  undo: UndoList,
  now: number,
): Promise<void> {
  const { store } = ctx.services;
  const { childKey } = ids;
  const binding = entry.threadBinding;
  // The router looks bound threads up by this key to route follow-ups into the child.
  const bindingKey = binding
    ? threadBindingKey(
        binding.channel,
        binding.accountId ?? plan.thread?.adapter.accountId ?? "default",
        binding.to,
        binding.threadId,
      )
    : undefined;
  undo.push(() => store.sessions.delete(childKey));
  await store.sessions.put(entry);
  undo.push(() => store.kv.delete(KV_SPAWN_REQUESTS, childKey));
  await store.kv.set(KV_SPAWN_REQUESTS, childKey, request);
  if (bindingKey) {
    undo.push(() => unbindThread(store, bindingKey));
    await bindThread(store, bindingKey, childKey, now);
  }
  await submitChild(ctx, plan.targetAgent, ids, request);
}

/** Carries out a plan: thread, attachment folder, entry, request, binding, run; undone on failure. */
export async function applySpawn(plan: SpawnPlan, ctx: SpawnCtx): Promise<SpawnResult> {
  const { services, caller } = ctx;
  const { args, targetAgent, mode } = plan;
  const ids = spawnIds(targetAgent, ctx.effectId);
  if (ctx.effectId) {
    const again = await resumeSpawn(ctx, plan, ids);
    if (again) return again;
  }
  const now = services.now();
  const label = args.label;
  const undo = new UndoList();

  let binding: ThreadBinding | undefined;
  if (plan.thread) {
    const created = await createThreadBinding(plan.thread, label ?? args.task, now);
    if (!created.ok) return failed(`thread: ${created.error}`);
    binding = created.binding;
  }

  let written: WrittenAttachments | undefined;
  if (plan.files) {
    try {
      written = await writeAttachments(
        childWorkspace(services, targetAgent, ids.sessionId),
        plan.files.files,
      );
    } catch (err) {
      return failed(`attachments: could not write the files: ${errorMessage(err)}`);
    }
    const w = written;
    undo.push(() => w.remove());
  }

  const request = await childRequest(ctx, plan, ids.childKey, attachInfoOf(written));
  const entry = childEntry(plan, ids, caller.sessionKey, now, binding);
  try {
    await persistAndSubmit(ctx, plan, ids, entry, request, undo, now);
  } catch (err) {
    await undo.run();
    return failed(`could not start the sub-agent: ${errorMessage(err)}`);
  }
  services.bus.emit("session.updated", { entry });

  const result: SpawnResult = {
    status: "accepted",
    runId: ids.runId,
    childSessionKey: ids.childKey,
    mode,
    note: mode === "session" ? `${SPAWN_NOTE} ${SESSION_NOTE}` : SPAWN_NOTE,
  };
  if (label) result.label = label;
  if (plan.modelRef) result.modelApplied = plan.modelRef;
  if (written) result.attachments = written.receipt satisfies AttachmentReceipt;
  if (binding) result.threadId = binding.threadId;
  return result;
}
