import { randomUUID } from "node:crypto";
import { z } from "zod";
import { spawnedByChain } from "../policy/access.js";
import type { Services } from "../services/index.js";
import { normalizeKey } from "../sessions/keys.js";
import { KV_SPAWN_REQUESTS, KV_SUPPRESSED } from "../store/kv-namespaces.js";
import { isFinal, type RunRecord, type SessionEntry } from "../store/types.js";
import { awaitsReport, childrenOf, type SpawnRequestRecord } from "../subagents/children.js";
import { submitAnnounce } from "../subagents/jobs.js";
import { defineTool, type ToolContext, type ToolResult } from "./types.js";

/**
 * `subagents` (SEMANTICS §3): list, kill (with descendants) and steer the caller's own children.
 * Runs come from the session store (`spawnedBy`) joined with run records, so the view survives a
 * restart and works the same on every driver.
 */

const RECENT_MS = 30 * 60_000;
const STEER_MAX_CHARS = 4000;
const STEER_INTERVAL_MS = 2000;
const MAX_TREE_DEPTH = 16;
const TASK_PREVIEW_CHARS = 72;

/** Last accepted steer per requester→child, per app (tests run several apps in one process). */
const steerTimes = new WeakMap<Services, Map<string, number>>();

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

export interface ChildRun {
  entry: SessionEntry;
  run: RunRecord | null;
  active: boolean;
}

export async function loadChildren(services: Services, requesterKey: string): Promise<ChildRun[]> {
  const out: ChildRun[] = [];
  for (const entry of await childrenOf(services, requesterKey, true)) {
    const run = entry.subagent ? await services.store.runs.get(entry.subagent.runId) : null;
    out.push({ entry, run, active: run !== null && !isFinal(run) });
  }
  return out; // newest spawn first
}

/** active (newest first), then recent (ended within 30 min, newest first): the index order. */
export function indexed(children: ChildRun[], now: number): { active: ChildRun[]; recent: ChildRun[] } {
  const active = children.filter((c) => c.active);
  const recent = children.filter(
    (c) => !c.active && now - (c.run?.endedAt ?? c.entry.subagent?.endedAt ?? 0) <= RECENT_MS,
  );
  return { active, recent };
}

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

type Resolved = { ok: true; child: ChildRun } | { ok: false; result: ToolResult };

export function resolveTarget(children: ChildRun[], target: string, now: number, action: string): Resolved {
  const err = (error: string): Resolved => ({
    ok: false,
    result: { status: "error", action, target, error },
  });
  if (children.length === 0) return err("this session has no sub-agents");
  if (target === "last") return { ok: true, child: children[0] as ChildRun };
  // Digits are an index when in range; otherwise they may still be a label or a runId prefix.
  let badIndex: string | undefined;
  if (/^\d+$/.test(target)) {
    const { active, recent } = indexed(children, now);
    const list = [...active, ...recent];
    const c = list[Number(target) - 1];
    if (c) return { ok: true, child: c };
    badIndex = `no sub-agent with index ${target} (1..${list.length}; see subagents list)`;
  }
  if (target.includes(":")) {
    const key = normalizeKey(target);
    const c = children.find((x) => x.entry.key === key);
    return c ? { ok: true, child: c } : err(`${key} is not one of this session's sub-agents`);
  }
  const lower = target.toLowerCase();
  const exact = children.filter((c) => c.entry.label?.toLowerCase() === lower);
  if (exact.length === 1) return { ok: true, child: exact[0] as ChildRun };
  if (exact.length > 1)
    return err(`label "${target}" matches ${exact.length} sub-agents; use an index or key`);
  const prefix = children.filter((c) => c.entry.label?.toLowerCase().startsWith(lower));
  if (prefix.length === 1) return { ok: true, child: prefix[0] as ChildRun };
  if (prefix.length > 1)
    return err(`label prefix "${target}" is ambiguous (${prefix.map((c) => c.entry.label).join(", ")})`);
  const byRun = children.filter((c) => c.entry.subagent?.runId.startsWith(lower));
  if (byRun.length === 1) return { ok: true, child: byRun[0] as ChildRun };
  if (byRun.length > 1) return err(`runId prefix "${target}" is ambiguous; give more characters`);
  return err(
    badIndex ?? `no sub-agent matches "${target}" (use last, an index, a key, a label or a runId prefix)`,
  );
}

/** Aborts the child's run if unfinished, then every descendant's; returns the keys of killed sessions. */
async function killTree(
  services: Services,
  entry: SessionEntry,
  seen: Set<string>,
  depth = 0,
): Promise<string[]> {
  if (seen.has(entry.key) || depth > MAX_TREE_DEPTH) return [];
  seen.add(entry.key);
  const killed: string[] = [];
  const runId = entry.subagent?.runId;
  const run = runId ? await services.store.runs.get(runId) : null;
  const live = runId !== undefined && run !== null && !isFinal(run);
  const children = await childrenOf(services, entry.key, true);
  // Marked before the cancel, so the announces of its own children (cascade) do not wake it again:
  // also when its run has ended but its announce waits for those children (subagents/announce.ts).
  if (live || children.some(awaitsReport))
    await services.store.sessions.patch(entry.key, { abortedLastRun: true });
  if (live && (await services.pipeline.cancel(runId, "aborted"))) {
    killed.push(entry.key);
    // A queued run ends without a turn (no afterTurn hook): announce its abort here. Same job id
    // as the hook's, so a running one is still announced exactly once.
    if (entry.spawnedBy) {
      const chain = (await spawnedByChain(services, entry)).slice(1);
      await submitAnnounce(services, {
        requesterKey: entry.spawnedBy,
        childKey: entry.key,
        chain,
        childRunId: runId,
        status: "aborted",
      });
    }
  }
  for (const child of children) {
    killed.push(...(await killTree(services, child, seen, depth + 1)));
  }
  return killed;
}

async function kill(args: Args, ctx: ToolContext, children: ChildRun[]): Promise<ToolResult> {
  const { services } = ctx;
  const target = args.target ?? "last";
  const seen = new Set<string>();
  if (target === "all" || target === "*") {
    const killed: string[] = [];
    for (const c of children) killed.push(...(await killTree(services, c.entry, seen)));
    return { status: "ok", action: "kill", target: "all", killed: killed.length, sessionKeys: killed };
  }
  const r = resolveTarget(children, target, services.now(), "kill");
  if (!r.ok) return r.result;
  const killed = await killTree(services, r.child.entry, seen);
  const base = {
    action: "kill",
    target,
    runId: r.child.entry.subagent?.runId,
    sessionKey: r.child.entry.key,
  };
  if (killed.length === 0)
    return { status: "done", ...base, killed: 0, message: "the sub-agent had already finished" };
  return { status: "ok", ...base, killed: killed.length, sessionKeys: killed };
}

async function steer(args: Args, ctx: ToolContext, children: ChildRun[]): Promise<ToolResult> {
  const { services, caller } = ctx;
  if (!args.target) return { status: "error", action: "steer", error: "steer needs a target" };
  if (!args.message)
    return { status: "error", action: "steer", target: args.target, error: "steer needs a message" };
  const now = services.now();
  const r = resolveTarget(children, args.target, now, "steer");
  if (!r.ok) return r.result;
  const { entry } = r.child;
  const runId = entry.subagent?.runId ?? "";
  const base = { action: "steer", target: args.target, sessionKey: entry.key };
  if (!r.child.active)
    return { status: "done", ...base, runId, message: "the sub-agent has already finished" };

  let times = steerTimes.get(services);
  if (!times) {
    times = new Map();
    steerTimes.set(services, times);
  }
  const pairKey = `${caller.sessionKey}\n${entry.key}`;
  const last = times.get(pairKey);
  if (last !== undefined && now - last < STEER_INTERVAL_MS) {
    return {
      status: "rate_limited",
      ...base,
      runId,
      error: `steered less than ${STEER_INTERVAL_MS / 1000} s ago; wait a moment`,
    };
  }

  if (await services.pipeline.steer(runId, args.message)) {
    times.set(pairKey, now);
    return { status: "accepted", ...base, runId, mode: "steer" };
  }
  // Not running (still queued, or it just ended): restart it with the guidance, or report done.
  const run = await services.store.runs.get(runId);
  if (isFinal(run)) return { status: "done", ...base, runId, message: "the sub-agent has already finished" };
  const request = await services.store.kv.get<SpawnRequestRecord>(KV_SPAWN_REQUESTS, entry.key);
  if (!request)
    return {
      status: "error",
      ...base,
      runId,
      error: "the sub-agent is not running yet and cannot be restarted; try again",
    };
  await services.store.kv.set(KV_SUPPRESSED, runId, { by: "steer", at: now });
  await services.pipeline.cancel(runId, "aborted");
  const newRunId = randomUUID();
  await services.store.sessions.update(entry.key, (cur) => {
    if (!cur?.subagent) return null;
    const { endedAt: _e, outcome: _o, ...rest } = cur.subagent;
    return { ...cur, subagent: { ...rest, runId: newRunId } };
  });
  await services.pipeline.submitTurn({
    sessionKey: entry.key,
    agentId: entry.agentId,
    text: `${request.text}\n\n[Steering from the requester] ${args.message}`,
    provenance: { kind: "inter_session", sourceSessionKey: caller.sessionKey, sourceTool: "subagents" },
    deliver: false,
    origin: "spawn",
    extraSystem: request.extraSystem,
    timeoutMs: request.timeoutMs,
    runId: newRunId,
    meta: { spawn: request.meta },
  });
  times.set(pairKey, now);
  return { status: "accepted", ...base, runId: newRunId, mode: "restart" };
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
