import { z } from "zod";
import type { Services } from "../../services/index.js";
import { isReservedKey } from "../../sessions/keys.js";
import { toRow } from "../../sessions/rows.js";
import type { RunRecord } from "../../store/types.js";
import { method, type RpcDispatcher } from "../rpc.js";
import { requireSession } from "./common.js";

/**
 * Read-only views for the operator dashboard: `dashboard.sessions` (the rows of `sessions.list`
 * plus what a console needs: status from the last run, tokens, cost, a sub-agent's task and
 * outcome) and `dashboard.runs` (one session's run timeline). Actions go through the ordinary
 * methods (`sessions.patch`, `sessions.reset`, `tools.invoke` → `subagents`), as the CLI's do.
 */

type RunView = Pick<
  RunRecord,
  "runId" | "status" | "createdAt" | "startedAt" | "endedAt" | "error" | "origin" | "model"
> & {
  durationMs?: number;
  tokens?: number;
  cost?: number;
  replyPreview?: string;
};

function runView(r: RunRecord): RunView {
  const start = r.startedAt ?? r.createdAt;
  return {
    runId: r.runId,
    status: r.status,
    createdAt: r.createdAt,
    ...(r.startedAt !== undefined ? { startedAt: r.startedAt } : {}),
    ...(r.endedAt !== undefined ? { endedAt: r.endedAt, durationMs: Math.max(0, r.endedAt - start) } : {}),
    ...(r.error ? { error: r.error } : {}),
    ...(r.origin ? { origin: r.origin } : {}),
    ...(r.model ? { model: r.model } : {}),
    ...(r.usage ? { tokens: r.usage.input + r.usage.output } : {}),
    ...(r.usage?.cost ? { cost: r.usage.cost } : {}),
    ...(r.reply ? { replyPreview: r.reply.length > 160 ? `${r.reply.slice(0, 160)}…` : r.reply } : {}),
  };
}

export function registerDashboardMethods(
  rpc: RpcDispatcher,
  services: Pick<Services, "config" | "store">,
): void {
  const { store } = services;

  rpc.register(
    "dashboard.sessions",
    method(
      z.strictObject({ limit: z.number().int().min(1).max(500).optional(), search: z.string().optional() }),
      async (p) => {
        const entries = await store.sessions.list({
          limit: p.limit ?? 200,
          ...(p.search ? { search: p.search } : {}),
          includeArchived: true,
        });
        const sessions = [];
        for (const e of entries) {
          if (isReservedKey(e.key)) continue;
          const [last] = await store.runs.listBySession(e.key, 1);
          const running = last && (last.status === "running" || last.status === "queued");
          const status = running
            ? "running"
            : e.archivedAt !== undefined
              ? "archived"
              : (e.subagent?.outcome ?? last?.status ?? "idle");
          sessions.push({
            ...toRow(e, store.transcripts),
            status,
            tokens: (e.inputTokens ?? 0) + (e.outputTokens ?? 0),
            inputTokens: e.inputTokens ?? 0,
            outputTokens: e.outputTokens ?? 0,
            costUsd: e.costUsd ?? 0,
            ...(e.lastModel ? { lastModel: e.lastModel } : {}),
            ...(e.subagent ? { task: e.subagent.task, subagentMode: e.subagent.mode } : {}),
            ...(last ? { lastRun: runView(last) } : {}),
          });
        }
        return { sessions };
      },
    ),
  );

  rpc.register(
    "dashboard.runs",
    method(
      z.strictObject({ sessionKey: z.string().min(1), limit: z.number().int().min(1).max(100).optional() }),
      async (p) => {
        const entry = await requireSession(services, p.sessionKey);
        const runs = await store.runs.listBySession(entry.key, p.limit ?? 20);
        return { runs: runs.map(runView) };
      },
    ),
  );
}
