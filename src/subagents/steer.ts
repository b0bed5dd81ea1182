import { randomUUID } from "node:crypto";
import type { Services } from "../services/index.js";
import { KV_SPAWN_REQUESTS, KV_SUPPRESSED } from "../store/kv-namespaces.js";
import { isFinal } from "../store/types.js";
import { linkMeta } from "../telemetry/index.js";
import { type ChildRun, resolveTarget, type SpawnRequestRecord } from "./children.js";
import type { SpawnCtx, SpawnResult } from "./types.js";

/**
 * `subagents steer`: guidance into a running child's next model call, or, when its run has not
 * started yet, a restart of it with the guidance (from the request it was spawned with); at most
 * once per 2 s per requester and child.
 */

const STEER_INTERVAL_MS = 2000;

/** Last accepted steer per requester→child, per app (tests run several apps in one process). */
const steerTimes = new WeakMap<Services, Map<string, number>>();

export async function steer(
  args: { target?: string | undefined; message?: string | undefined },
  ctx: Pick<SpawnCtx, "services" | "caller" | "traceparent">,
  children: ChildRun[],
): Promise<SpawnResult> {
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
    meta: { spawn: request.meta, ...linkMeta(ctx.traceparent) },
  });
  times.set(pairKey, now);
  return { status: "accepted", ...base, runId: newRunId, mode: "restart" };
}
