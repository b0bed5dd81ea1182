import { z } from "zod";
import type { ToolRegistry } from "../agent/tool-registry.js";
import { NotFoundError, SwitchboardError } from "../errors.js";
import { readHistory, sessionsHistorySchema } from "../history/read.js";
import { buildHistoryView } from "../history/view.js";
import type { Services } from "../services.js";
import { isReservedKey } from "../sessions/keys.js";
import { toRow } from "../sessions/rows.js";
import { callerOf, operatorCaller, resolveSessionRef } from "../sessions/service.js";
import type { SessionPatch } from "../store/types.js";
import { chatSend } from "./chat-send.js";
import { method, type RpcDispatcher } from "./rpc.js";

/** The RPC methods of API.md §4, over the services. Operators see every session. */

const KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;

export interface MethodDeps {
  services: Services;
  tools: ToolRegistry;
  health: () => Promise<Record<string, unknown>>;
}

export async function requireSession(services: Pick<Services, "config" | "store">, input: string) {
  const r = await resolveSessionRef(services, input, operatorCaller(services));
  if (!r.ok) {
    if (r.notFound) throw new NotFoundError("session", input);
    throw new SwitchboardError("INVALID_PARAMS", r.error, { details: { field: "sessionKey" } });
  }
  return r.entry;
}

/**
 * The read-only methods (`sessions.list`, `sessions.history`): they need nothing but the store,
 * so the CLI can also serve them straight from the local store when no gateway runs (API.md §2).
 */
export function registerReadMethods(rpc: RpcDispatcher, services: Pick<Services, "config" | "store">): void {
  const { store } = services;

  rpc.register(
    "sessions.list",
    method(
      z.strictObject({
        agentId: z.string().optional(),
        kinds: z.array(z.string()).optional(),
        limit: z.number().int().min(1).optional(),
        activeMinutes: z.number().positive().optional(),
        messageLimit: z.number().int().min(0).max(20).optional(),
        label: z.string().optional(),
        search: z.string().optional(),
      }),
      async (p) => {
        const kinds = (p.kinds ?? []).filter((k): k is (typeof KINDS)[number] =>
          (KINDS as readonly string[]).includes(k),
        );
        const entries = await store.sessions.list({
          ...(p.agentId ? { agentId: p.agentId.toLowerCase() } : {}),
          ...(kinds.length ? { kinds } : {}),
          ...(p.label !== undefined ? { label: p.label } : {}),
          ...(p.activeMinutes !== undefined ? { activeMinutes: p.activeMinutes } : {}),
          ...(p.search ? { search: p.search } : {}),
          limit: Math.min(200, p.limit ?? 50),
        });
        const rows = [];
        for (const e of entries) {
          if (isReservedKey(e.key)) continue;
          const row = toRow(e, store.transcripts);
          if (p.messageLimit) {
            const msgs = await store.transcripts.readTail(
              { agentId: e.agentId, sessionId: e.sessionId },
              { limit: p.messageLimit, includeTools: false },
            );
            row.messages = buildHistoryView(msgs, { includeTools: false }).messages as typeof row.messages;
          }
          rows.push(row);
        }
        return { count: rows.length, sessions: rows };
      },
    ),
  );

  rpc.register(
    "sessions.history",
    method(sessionsHistorySchema, async (p) =>
      readHistory(services, await requireSession(services, p.sessionKey), p),
    ),
  );
}

export function registerMethods(rpc: RpcDispatcher, deps: MethodDeps): void {
  const { services, tools } = deps;
  const { store } = services;

  rpc.register(
    "health",
    method(z.object({}), () => deps.health()),
  );

  rpc.register(
    "agents.list",
    method(z.object({}), async () => ({
      agents: services.config.agents.list.map((a) => ({
        id: a.id,
        name: a.name ?? a.id,
        model: services.models.modelFor(a.id),
      })),
    })),
  );

  registerReadMethods(rpc, services);

  rpc.register(
    "sessions.patch",
    method(
      z.strictObject({
        sessionKey: z.string().min(1),
        patch: z.strictObject({
          sendPolicy: z.enum(["allow", "deny"]).nullable().optional(),
          label: z.string().max(200).nullable().optional(),
          model: z.string().nullable().optional(),
          thinkingLevel: z.enum(["off", "minimal", "low", "medium", "high"]).nullable().optional(),
        }),
      }),
      async (p) => {
        const entry = await requireSession(services, p.sessionKey);
        const patch: SessionPatch = {};
        if (p.patch.sendPolicy !== undefined) patch.sendPolicy = p.patch.sendPolicy ?? undefined;
        if (p.patch.label !== undefined) patch.label = p.patch.label ?? undefined;
        if (p.patch.thinkingLevel !== undefined) patch.thinkingLevel = p.patch.thinkingLevel ?? undefined;
        if (p.patch.model !== undefined) {
          if (p.patch.model === null || p.patch.model === "default") patch.model = undefined;
          else {
            services.models.resolve(p.patch.model);
            if (!services.models.isAllowed(p.patch.model)) {
              throw new SwitchboardError(
                "FORBIDDEN",
                `model ${p.patch.model} is not allowed (models.allowed)`,
                {
                  details: { field: "patch.model" },
                },
              );
            }
            patch.model = p.patch.model;
          }
        }
        patch.updatedAt = services.now();
        const updated = await store.sessions.patch(entry.key, patch);
        if (!updated) throw new NotFoundError("session", entry.key);
        services.bus.emit("session.updated", { entry: updated });
        return { entry: toRow(updated, store.transcripts) };
      },
    ),
  );

  rpc.register(
    "sessions.delete",
    method(z.strictObject({ sessionKey: z.string().min(1) }), async (p) => {
      const entry = await requireSession(services, p.sessionKey);
      await store.transcripts.archive({ agentId: entry.agentId, sessionId: entry.sessionId }, "deleted");
      await store.sessions.delete(entry.key);
      return { deleted: true };
    }),
  );

  rpc.register(
    "runs.get",
    method(z.strictObject({ runId: z.string().min(1) }), async (p) => {
      const run = await store.runs.get(p.runId);
      if (!run) throw new NotFoundError("run", p.runId);
      return {
        runId: run.runId,
        sessionKey: run.sessionKey,
        status: run.status,
        ...(run.startedAt ? { startedAt: run.startedAt } : {}),
        ...(run.endedAt ? { endedAt: run.endedAt } : {}),
        ...(run.reply !== undefined ? { reply: run.reply } : {}),
        ...(run.error ? { error: run.error } : {}),
        ...(run.usage ? { usage: run.usage } : {}),
        ...(run.deliveryError ? { deliveryError: run.deliveryError } : {}),
      };
    }),
  );

  rpc.register(
    "agent.wait",
    method(
      z.strictObject({
        runId: z.string().min(1),
        timeoutMs: z.number().int().min(0).max(3_600_000).default(30_000),
      }),
      async (p) => {
        const run = await services.pipeline.wait(p.runId, p.timeoutMs);
        if (!run) throw new NotFoundError("run", p.runId);
        const final = run.status !== "queued" && run.status !== "running";
        return {
          runId: run.runId,
          status: final ? run.status : "running",
          ...(final && run.reply !== undefined ? { reply: run.reply } : {}),
          ...(final && run.error ? { error: run.error } : {}),
        };
      },
    ),
  );

  rpc.register(
    "chat.send",
    method(
      z.strictObject({
        sessionKey: z.string().min(1),
        message: z.string().min(1).max(32_000),
        timeoutSeconds: z.number().min(0).max(3600).optional(),
        deliver: z.boolean().optional(),
      }),
      (p) => chatSend(services, p),
    ),
  );

  rpc.register(
    "tools.list",
    method(z.strictObject({ sessionKey: z.string().min(1) }), async (p) => {
      const entry = await requireSession(services, p.sessionKey);
      return { sessionKey: entry.key, tools: tools.specs(services, callerOf(services, entry)) };
    }),
  );

  rpc.register(
    "tools.invoke",
    method(
      z.strictObject({
        sessionKey: z.string().min(1),
        tool: z.string().min(1),
        args: z.record(z.string(), z.unknown()).default({}),
      }),
      async (p) => {
        const entry = await requireSession(services, p.sessionKey);
        const caller = callerOf(services, entry);
        const active = (await services.pipeline.queueInfo(entry.key)).activeRunId;
        if (active) caller.runId = active;
        const out = await tools.invoke(p.tool, p.args, {
          services,
          caller,
          signal: new AbortController().signal,
        });
        if (!out.ok) throw new SwitchboardError(out.code, out.message, { details: { tool: p.tool } });
        return out.result;
      },
    ),
  );
}
