import { z } from "zod";
import { errorMessage } from "../errors.js";
import { resolveVisibleTarget } from "../policy/access.js";
import { collectStatus, formatDuration, renderStatusCard } from "../policy/status-card.js";
import type { Services } from "../services/index.js";
import { displayKey } from "../sessions/keys.js";
import { VERBOSE_LEVELS } from "../sessions/rows.js";
import type { SessionEntry } from "../store/types.js";
import { defineTool } from "./types.js";

/**
 * `session_status` (SEMANTICS.md §3): the status card of a visible session, optionally setting or
 * clearing its per-session model override first. A model that does not resolve to a configured
 * provider, or is not allowed by `models.allowed`, is `status:"error"` and changes nothing.
 */

export const sessionStatusSchema = z.strictObject({
  sessionKey: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Session key from sessions_list, "main", a sessionId, or "current" (default: your own session).',
    ),
  model: z
    .string()
    .max(256)
    .optional()
    .describe(
      'Set this session\'s model ("<provider>/<model>", must be allowed); "default" clears the override.',
    ),
  verboseLevel: z
    .enum([...VERBOSE_LEVELS, "default"])
    .optional()
    .describe('Set this session\'s verbosity ("off", "on", "full"); "default" clears it.'),
});

type ModelChange = { ok: true; entry: SessionEntry; changed: boolean } | { ok: false; error: string };

async function applyModel(services: Services, entry: SessionEntry, raw: string): Promise<ModelChange> {
  const input = raw.trim();
  let next: string | undefined;
  if (input !== "" && input.toLowerCase() !== "default") {
    let ref: string;
    try {
      ref = services.models.resolve(input).ref;
    } catch (err) {
      return { ok: false, error: errorMessage(err) };
    }
    if (!services.models.isAllowed(ref)) {
      const allowed = services.config.models.allowed;
      return {
        ok: false,
        error: `model "${ref}" is not allowed; models.allowed permits ${allowed.length > 0 ? JSON.stringify(allowed) : "any model of a configured provider"}`,
      };
    }
    next = ref;
  }
  if (entry.model === next) return { ok: true, entry, changed: false };
  const updated = await services.store.sessions.patch(entry.key, { model: next, updatedAt: services.now() });
  if (!updated) return { ok: false, error: `session ${entry.key} no longer exists` };
  services.bus.emit("session.updated", { entry: updated });
  return { ok: true, entry: updated, changed: true };
}

export const sessionStatusTool = defineTool({
  name: "session_status",
  description:
    "Show a session's status card (model, tokens, context use, queue, send policy, lineage, delivery). " +
    'Defaults to your own session. Pass model "<provider>/<model>" to switch that session\'s model, or "default" to reset it.',
  schema: () => sessionStatusSchema,
  async execute(args, { services, caller }) {
    const requested = args.sessionKey ?? "current";
    const target = await resolveVisibleTarget(services, caller, requested);
    if (!target.ok)
      return { status: target.result.status, error: target.result.error, sessionKey: requested };
    const shown = displayKey(target.entry.key, caller.agentId);

    let entry = target.entry;
    let changedModel = false;
    if (args.model !== undefined) {
      const change = await applyModel(services, entry, args.model);
      if (!change.ok) return { status: "error", error: change.error, sessionKey: shown, changedModel: false };
      entry = change.entry;
      changedModel = change.changed;
    }

    if (args.verboseLevel !== undefined) {
      const next = args.verboseLevel === "default" ? undefined : args.verboseLevel;
      if (entry.verboseLevel !== next) {
        const updated = await services.store.sessions.patch(entry.key, {
          verboseLevel: next,
          updatedAt: services.now(),
        });
        if (!updated)
          return { status: "error", error: `session ${entry.key} no longer exists`, sessionKey: shown };
        services.bus.emit("session.updated", { entry: updated });
        entry = updated;
      }
    }

    const s = await collectStatus(services, entry);
    return {
      status: "ok",
      sessionKey: shown,
      sessionId: s.sessionId,
      agentId: s.agentId,
      kind: s.kind,
      channel: s.channel,
      statusText: renderStatusCard(s, services.now()),
      model: s.model,
      ...(s.modelOverride !== undefined ? { modelOverride: s.modelOverride } : {}),
      changedModel,
      tokens: s.tokens,
      ...(s.costUsd !== undefined ? { costUsd: s.costUsd } : {}),
      updatedAt: s.updatedAt,
      queue: s.queue,
      sendPolicy: s.sendPolicy.action,
      ...(s.sendPolicy.override !== undefined ? { sendPolicyOverride: s.sendPolicy.override } : {}),
      sendPolicyReason: s.sendPolicy.reason,
      ...(s.label !== undefined ? { label: s.label } : {}),
      ...(entry.verboseLevel !== undefined ? { verboseLevel: entry.verboseLevel } : {}),
      ...(s.lineage.spawnedBy !== undefined
        ? { spawnedBy: displayKey(s.lineage.spawnedBy, caller.agentId) }
        : {}),
      spawnDepth: s.lineage.spawnDepth,
      // Linked background work (SEMANTICS §3): children of this session; for a child, its parent.
      children: s.children.map((c) => ({
        sessionKey: displayKey(c.sessionKey, caller.agentId),
        ...(c.label !== undefined ? { label: c.label } : {}),
        status: c.status,
        runtimeMs: c.runtimeMs,
        runtime: formatDuration(c.runtimeMs),
      })),
      ...(s.lineage.spawnedBy !== undefined
        ? { parent: displayKey(s.lineage.spawnedBy, caller.agentId), depth: s.lineage.spawnDepth }
        : {}),
      ...(s.delivery ? { deliveryContext: s.delivery } : {}),
    };
  },
});
