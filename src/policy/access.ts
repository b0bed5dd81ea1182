import type { Services } from "../services/index.js";
import type { ToolCaller } from "../sessions/caller.js";
import { routeOf } from "../sessions/route.js";
import { resolveSessionRef } from "../sessions/service.js";
import type { SessionEntry } from "../store/types.js";
import { chatTypeOfKey, evaluateSendPolicy, type SendPolicyDecision } from "./send-policy.js";
import { canSee, effectiveVisibility, type VisibilityDecision } from "./visibility.js";

/**
 * Shared checks for tools that address another session: resolve the `sessionKey` argument,
 * apply visibility (with the sandbox clamp), and evaluate the send policy (SEMANTICS §2).
 */

const MAX_CHAIN = 16;

/** What the visibility check reads: the store (the spawnedBy chain) and the config. */
export type VisibilityDeps = Pick<Services, "store" | "config">;
/**
 * What resolving a target needs: `resolveSessionRef` creates a configured agent's missing main
 * session, so it writes (bus and clock) as well as reads.
 */
export type TargetDeps = Pick<Services, "store" | "config" | "bus" | "now">;
/** The send policy reads the config only. */
export type SendPolicyDeps = Pick<Services, "config">;

/** The target's ancestors, nearest first (spawnedBy, its spawnedBy, …). */
export async function spawnedByChain(
  services: Pick<Services, "store">,
  entry: SessionEntry,
): Promise<string[]> {
  const chain: string[] = [];
  let cur: SessionEntry | null = entry;
  while (cur?.spawnedBy && chain.length < MAX_CHAIN) {
    chain.push(cur.spawnedBy);
    cur = await services.store.sessions.get(cur.spawnedBy);
  }
  return chain;
}

export async function checkVisible(
  services: VisibilityDeps,
  caller: ToolCaller,
  target: SessionEntry,
): Promise<VisibilityDecision> {
  const cfg = services.config;
  const configured = cfg.tools.sessions.visibility;
  const visibility = effectiveVisibility({
    configured,
    sandboxed: caller.sandboxed,
    sessionToolsVisibility: cfg.agents.defaults.sandbox.sessionToolsVisibility,
  });
  return canSee({
    visibility,
    configured,
    caller: { key: caller.sessionKey, agentId: caller.agentId },
    target: {
      key: target.key,
      agentId: target.agentId,
      spawnedByChain: await spawnedByChain(services, target),
    },
    agentToAgent: cfg.tools.agentToAgent,
  });
}

export type TargetResult =
  | { ok: true; entry: SessionEntry }
  | { ok: false; result: { status: "error" | "forbidden"; error: string; sessionKey?: string } };

/** Resolves and checks visibility of a tool's `sessionKey` argument. */
export async function resolveVisibleTarget(
  services: TargetDeps,
  caller: ToolCaller,
  input: string,
): Promise<TargetResult> {
  const r = await resolveSessionRef(services, input, caller);
  if (!r.ok) return { ok: false, result: { status: "error", error: r.error } };
  const v = await checkVisible(services, caller, r.entry);
  if (!v.ok) return { ok: false, result: { status: "forbidden", error: v.reason, sessionKey: r.entry.key } };
  return { ok: true, entry: r.entry };
}

/** The send-policy verdict for `entry` with its reason (session_status and /status show it). */
export function sendDecision(
  services: SendPolicyDeps,
  entry: SessionEntry,
  route: { channel: string } | null = routeOf(entry),
): SendPolicyDecision {
  const p = services.config.session.sendPolicy;
  // the channel delivery would post into (sessions/route.ts); the session's own without a route
  const channel = route?.channel ?? entry.channel ?? entry.lastChannel;
  const chatType = entry.chatType ?? chatTypeOfKey(entry.key);
  return evaluateSendPolicy({
    ...(entry.sendPolicy ? { override: entry.sendPolicy } : {}),
    rules: p.rules,
    default: p.default,
    target: { key: entry.key, ...(channel ? { channel } : {}), ...(chatType ? { chatType } : {}) },
  });
}

/** null when sending into `entry` is allowed; else the error text (contains "send blocked by session policy"). */
export function sendBlocked(services: SendPolicyDeps, entry: SessionEntry): string | null {
  const verdict = sendDecision(services, entry);
  return verdict.action === "deny" ? `send blocked by session policy (${verdict.reason})` : null;
}
