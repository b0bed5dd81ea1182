import { z } from "zod";
import { NotFoundError } from "../../errors.js";
import type { Services } from "../../services/index.js";
import { FINAL_RUN_STATUSES } from "../../store/types.js";
import { method, type RpcDispatcher } from "../rpc.js";

/** `runs.get` and `agent.wait` (API.md §4). */
export function registerRunMethods(rpc: RpcDispatcher, services: Pick<Services, "store" | "pipeline">): void {
  const { store } = services;

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
        ...(run.model ? { model: run.model } : {}),
        ...(run.fallbacks ? { fallbacks: run.fallbacks } : {}),
        ...(run.deliveryError ? { deliveryError: run.deliveryError } : {}),
        ...(run.status === "waiting" && run.waitingFor ? { waitingFor: run.waitingFor } : {}),
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
        const final = FINAL_RUN_STATUSES.has(run.status);
        return {
          runId: run.runId,
          status: final ? run.status : "running",
          ...(final && run.reply !== undefined ? { reply: run.reply } : {}),
          ...(final && run.error ? { error: run.error } : {}),
        };
      },
    ),
  );
}
