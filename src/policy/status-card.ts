import { redactSecrets } from "../redact.js";
import type { Services } from "../services/index.js";
import { classifyKind, deriveChannel } from "../sessions/keys.js";
import { nextResetAt, resetRuleFor } from "../sessions/reset.js";
import { routeOf } from "../sessions/route.js";
import { type DeliveryContext, isFinal, type SessionEntry, type SessionKind } from "../store/types.js";
import { sendDecision, spawnedByChain } from "./access.js";

/**
 * The status of one session, as data (`collectStatus`, used by session_status) and as the
 * `/status`-style card (`statusCard`, also answered to the owner command `/status`). Read-only.
 */

export interface SessionStatus {
  sessionKey: string;
  sessionId: string;
  agentId: string;
  kind: SessionKind;
  channel: string;
  label?: string;
  displayName?: string;
  /** The model the next turn uses. */
  model: string;
  /** The per-session override, when one is set. */
  modelOverride?: string;
  /** The model that answered the last call (a fallback when the session's model failed). */
  lastModel?: string;
  thinkingLevel?: string;
  verboseLevel?: string;
  tokens: {
    /** Cumulative input tokens of every run. */
    input: number;
    /** Cumulative output tokens of every run. */
    output: number;
    /** input + output (the one definition, as in rows and the announce stats line). */
    total: number;
    /** Tokens in the session's context as of the last model call. */
    contextUsed: number;
    /** The model's context window. */
    context: number;
  };
  costUsd?: number;
  createdAt: number;
  updatedAt: number;
  /** When the current sessionId started (createdAt unless reset since). */
  sessionStartedAt: number;
  /** When a `session.reset` policy starts a new session (at the first message after it). */
  resetAt?: number;
  /** The reset policy that applies: "daily at 04:00", "idle 1440 min"; absent when off. */
  resetPolicy?: string;
  /** The last prompt's real size (provider-reported), tokens. */
  promptTokens?: number;
  compactions?: number;
  abortedLastRun?: boolean;
  queue: { pending: number; active: boolean; activeRunId?: string };
  sendPolicy: { action: "allow" | "deny"; override?: "allow" | "deny"; reason: string };
  lineage: { spawnedBy?: string; spawnDepth: number; ancestors: string[] };
  /** Linked background work: running and recent children (newest first). */
  children: LinkedChild[];
  delivery?: DeliveryContext;
  lastChannel?: string;
  lastTo?: string;
  version: string;
}

export interface LinkedChild {
  sessionKey: string;
  label?: string;
  /** The child's current run status (queued/running/ok/error/timeout/aborted). */
  status: string;
  runtimeMs: number;
}

/** What a status reads: the session's store rows, its queue, its model, the config and the clock. */
export type StatusDeps = Pick<Services, "store" | "pipeline" | "models" | "config" | "now" | "version">;

/** Children listed in a status: running ones and those that ended within this window. */
const RECENT_CHILD_MS = 30 * 60_000;
/** Newest children looked at (one run record read each). */
const MAX_LINKED_CHILDREN = 20;

async function linkedChildren(
  services: Pick<Services, "store" | "now">,
  key: string,
): Promise<LinkedChild[]> {
  const now = services.now();
  const entries = await services.store.sessions.list({
    spawnedBy: key,
    includeArchived: true,
    limit: MAX_LINKED_CHILDREN,
  });
  const out: LinkedChild[] = [];
  for (const e of entries) {
    if (!e.subagent) continue;
    const run = await services.store.runs.get(e.subagent.runId);
    const running = run !== null && !isFinal(run);
    const endedAt = run?.endedAt ?? e.subagent.endedAt;
    if (!running && (endedAt === undefined || now - endedAt > RECENT_CHILD_MS)) continue;
    const started = run?.startedAt ?? run?.createdAt;
    out.push({
      sessionKey: e.key,
      ...(e.label !== undefined ? { label: e.label } : {}),
      status: run?.status ?? e.subagent.outcome ?? "unknown",
      runtimeMs: started === undefined ? 0 : Math.max(0, (running ? now : (endedAt ?? now)) - started),
    });
  }
  return out;
}

export async function collectStatus(services: StatusDeps, entry: SessionEntry): Promise<SessionStatus> {
  const model = services.models.modelFor(entry.agentId, entry);
  const queue = await services.pipeline.queueInfo(entry.key);
  // The send policy judges the channel delivery would post into: the session's one route.
  const policy = sendDecision(services, entry, routeOf(entry));
  const input = entry.inputTokens ?? 0;
  const output = entry.outputTokens ?? 0;
  const s: SessionStatus = {
    sessionKey: entry.key,
    sessionId: entry.sessionId,
    agentId: entry.agentId,
    kind: classifyKind(entry.key),
    channel: deriveChannel(entry.key, entry),
    model,
    tokens: {
      input,
      output,
      total: input + output,
      contextUsed: entry.contextUsedTokens ?? 0,
      context: services.models.contextTokens(model),
    },
    createdAt: entry.createdAt,
    updatedAt: entry.updatedAt,
    sessionStartedAt: entry.sessionStartedAt ?? entry.createdAt,
    queue: {
      pending: queue.pending,
      active: queue.activeRunId !== undefined,
      ...(queue.activeRunId !== undefined ? { activeRunId: queue.activeRunId } : {}),
    },
    sendPolicy: {
      action: policy.action,
      ...(entry.sendPolicy ? { override: entry.sendPolicy } : {}),
      reason: policy.reason,
    },
    lineage: {
      ...(entry.spawnedBy ? { spawnedBy: entry.spawnedBy } : {}),
      spawnDepth: entry.spawnDepth ?? 0,
      ancestors: await spawnedByChain(services, entry),
    },
    children: await linkedChildren(services, entry.key),
    version: services.version,
  };
  if (entry.label !== undefined) s.label = entry.label;
  if (entry.displayName !== undefined) s.displayName = entry.displayName;
  if (entry.model !== undefined) s.modelOverride = entry.model;
  if (entry.lastModel !== undefined) s.lastModel = entry.lastModel;
  if (entry.thinkingLevel !== undefined) s.thinkingLevel = entry.thinkingLevel;
  if (entry.verboseLevel !== undefined) s.verboseLevel = entry.verboseLevel;
  if (entry.costUsd !== undefined && entry.costUsd > 0) s.costUsd = entry.costUsd;
  if (entry.abortedLastRun) s.abortedLastRun = true;
  if (entry.contextTokens !== undefined) s.promptTokens = entry.contextTokens;
  if (entry.compactionCount) s.compactions = entry.compactionCount;
  const rule = resetRuleFor(services.config, entry.channel ?? s.channel, entry.chatType);
  const resetAt = entry.spawnedBy === undefined ? nextResetAt(rule, entry, services.now()) : undefined;
  if (resetAt !== undefined) {
    s.resetAt = resetAt;
    s.resetPolicy =
      rule.mode === "daily"
        ? `daily at ${String(rule.atHour).padStart(2, "0")}:00`
        : `idle ${rule.idleMinutes} min`;
  }
  if (entry.deliveryContext) s.delivery = { ...entry.deliveryContext };
  if (entry.lastChannel !== undefined) s.lastChannel = entry.lastChannel;
  if (entry.lastTo !== undefined) s.lastTo = entry.lastTo;
  return s;
}

function compact(n: number): string {
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(n >= 10_000_000 ? 0 : 1)}M`;
  if (n >= 1000) return `${(n / 1000).toFixed(n >= 10_000 ? 0 : 1)}k`;
  return String(n);
}

function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

/** The card text: one fact per line, labels first, no secrets (free-text fields are redacted). */
export function renderStatusCard(s: SessionStatus, now: number): string {
  const lines: string[] = [];
  lines.push(`Session: ${s.sessionKey} (${s.kind}, ${s.channel})`);
  if (s.label !== undefined) lines.push(`Label: ${redactSecrets(s.label)}`);
  if (s.displayName !== undefined) lines.push(`Name: ${redactSecrets(s.displayName)}`);
  lines.push(
    `Model: ${s.model}${s.modelOverride !== undefined ? " (session override)" : ""}` +
      (s.thinkingLevel !== undefined ? ` · thinking ${s.thinkingLevel}` : "") +
      (s.verboseLevel !== undefined ? ` · verbose ${s.verboseLevel}` : ""),
  );
  if (s.lastModel !== undefined) lines.push(`Last model: ${s.lastModel}`);
  lines.push(
    `Tokens: ${compact(s.tokens.total)} (${compact(s.tokens.input)} in / ${compact(s.tokens.output)} out)` +
      (s.costUsd !== undefined ? ` · cost $${s.costUsd.toFixed(4)}` : ""),
  );
  const pct = s.tokens.context > 0 ? Math.round((s.tokens.contextUsed / s.tokens.context) * 100) : 0;
  lines.push(`Context: ${compact(s.tokens.contextUsed)} / ${compact(s.tokens.context)} (${pct}%)`);
  lines.push(
    `Queue: ${s.queue.active ? `running ${s.queue.activeRunId}` : "idle"}, ${s.queue.pending} pending` +
      (s.abortedLastRun ? " · last run aborted" : ""),
  );
  lines.push(
    `Send policy: ${s.sendPolicy.action}` +
      (s.sendPolicy.override !== undefined ? " (session override)" : ` (${s.sendPolicy.reason})`),
  );
  if (s.lineage.spawnedBy !== undefined) {
    lines.push(`Lineage: spawned by ${s.lineage.spawnedBy} (depth ${s.lineage.spawnDepth})`);
  }
  if (s.children.length > 0) {
    const running = s.children.filter((c) => c.status === "running" || c.status === "queued").length;
    lines.push(`Sub-agents: ${running} running, ${s.children.length - running} recent`);
    for (const c of s.children) {
      lines.push(
        `  - ${c.label !== undefined ? redactSecrets(c.label) : c.sessionKey} (${c.status}, ${formatDuration(c.runtimeMs)})`,
      );
    }
  }
  if (s.delivery) {
    const d = s.delivery;
    lines.push(
      `Delivery: ${d.channel} → ${d.to}` +
        (d.accountId !== undefined ? ` (account ${d.accountId})` : "") +
        (d.threadId !== undefined ? ` thread ${d.threadId}` : ""),
    );
  } else if (s.lastChannel !== undefined) {
    lines.push(`Delivery: last seen on ${s.lastChannel}${s.lastTo !== undefined ? ` → ${s.lastTo}` : ""}`);
  } else {
    lines.push("Delivery: none (replies are not delivered to a chat)");
  }
  if (s.promptTokens !== undefined || s.compactions !== undefined) {
    lines.push(
      `Last prompt: ${compact(s.promptTokens ?? 0)} tokens` +
        (s.compactions !== undefined
          ? ` · ${s.compactions} compaction${s.compactions === 1 ? "" : "s"}`
          : ""),
    );
  }
  lines.push(
    `Session started: ${new Date(s.sessionStartedAt).toISOString()} (${ago(now - s.sessionStartedAt)})` +
      (s.resetAt !== undefined
        ? ` · resets ${s.resetAt <= now ? "with the next message" : `at ${new Date(s.resetAt).toISOString()}`} (${s.resetPolicy})`
        : " · no automatic reset"),
  );
  lines.push(
    `Updated: ${new Date(s.updatedAt).toISOString()} (${ago(now - s.updatedAt)}) · session ${s.sessionId}`,
  );
  lines.push(`Switchboard ${s.version}`);
  return lines.join("\n");
}

/** The `/status` card of `entry` (session_status's `statusText`; the `/status` owner command). */
export async function statusCard(services: StatusDeps, entry: SessionEntry): Promise<string> {
  return renderStatusCard(await collectStatus(services, entry), services.now());
}

/** `5s`, `4m12s`, `2h05m`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
