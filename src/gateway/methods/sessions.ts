import { z } from "zod";
import { NotFoundError, SwitchboardError } from "../../errors.js";
import { derivedTitle, lastMessage } from "../../history/preview.js";
import { readHistory, sessionsHistorySchema } from "../../history/read.js";
import { buildHistoryView } from "../../history/view.js";
import type { Services } from "../../services/index.js";
import { isReservedKey } from "../../sessions/keys.js";
import { toRow, VERBOSE_LEVELS } from "../../sessions/rows.js";
import type { SessionPatch } from "../../store/types.js";
import { listBounds, sessionsListSchema, storeQuery } from "../../tools/sessions-list.js";
import { method, type RpcDispatcher } from "../rpc.js";
import { requireSession } from "./common.js";

/** `sessions.*` (API.md §4). Operators see every session. */

/**
 * The read-only methods (`sessions.list`, `sessions.history`): they need nothing but the store,
 * so the CLI can also serve them straight from the local store when no gateway runs (API.md §2).
 */
export function registerReadMethods(rpc: RpcDispatcher, services: Pick<Services, "config" | "store">): void {
  const { store } = services;

  rpc.register(
    "sessions.list",
    // The sessions_list tool's params, bounded the same way (SEMANTICS §3); the operator sees every row.
    method(sessionsListSchema, async (p) => {
      const { filters, limit, messageLimit } = listBounds(p);
      const entries = await store.sessions.list(storeQuery(filters, filters.agentId, limit));
      const rows = [];
      for (const e of entries) {
        if (isReservedKey(e.key)) continue;
        const row = toRow(e, store.transcripts);
        if (messageLimit > 0) {
          const msgs = await store.transcripts.readTail(
            { agentId: e.agentId, sessionId: e.sessionId },
            { limit: messageLimit, includeTools: false },
          );
          row.messages = buildHistoryView(msgs, { includeTools: false }).messages as typeof row.messages;
        }
        const ref = { agentId: e.agentId, sessionId: e.sessionId };
        if (p.includeDerivedTitles) {
          const title = await derivedTitle(store.transcripts, ref);
          if (title !== undefined) row.derivedTitle = title;
        }
        if (p.includeLastMessage) {
          const last = await lastMessage(store.transcripts, ref);
          if (last) row.lastMessage = last;
        }
        rows.push(row);
      }
      return { count: rows.length, sessions: rows };
    }),
  );

  rpc.register(
    "sessions.history",
    method(sessionsHistorySchema, async (p) =>
      readHistory(services, await requireSession(services, p.sessionKey), p),
    ),
  );
}

/** `sessions.patch` and `sessions.delete`. */
export function registerSessionWriteMethods(
  rpc: RpcDispatcher,
  services: Pick<Services, "config" | "store" | "models" | "bus" | "now">,
): void {
  const { store } = services;

  rpc.register(
    "sessions.patch",
    method(
      z.strictObject({
        sessionKey: z.string().min(1),
        patch: z.strictObject({
          // "inherit" and null both clear the per-session override.
          sendPolicy: z.enum(["allow", "deny", "inherit"]).nullable().optional(),
          label: z.string().max(200).nullable().optional(),
          model: z.string().nullable().optional(),
          thinkingLevel: z.enum(["off", "minimal", "low", "medium", "high"]).nullable().optional(),
          verboseLevel: z.enum(VERBOSE_LEVELS).nullable().optional(),
        }),
      }),
      async (p) => {
        const entry = await requireSession(services, p.sessionKey);
        const patch: SessionPatch = {};
        if (p.patch.sendPolicy !== undefined)
          patch.sendPolicy = p.patch.sendPolicy === "inherit" ? undefined : (p.patch.sendPolicy ?? undefined);
        if (p.patch.verboseLevel !== undefined) patch.verboseLevel = p.patch.verboseLevel ?? undefined;
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
}
