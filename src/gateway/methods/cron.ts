import { z } from "zod";
import type { CronJobs } from "../../services/cron.js";
import { method, type RpcDispatcher } from "../rpc.js";

/** The `cron.*` RPC methods (API.md §7). Operators see and manage every job. */

const jobId = z.string().trim().min(1).max(64);

export function registerCronMethods(rpc: RpcDispatcher, cron: CronJobs): void {
  rpc.register(
    "cron.list",
    method(z.strictObject({ agentId: z.string().optional() }), async (p) => ({
      jobs: await cron.list(p.agentId ? { agentId: p.agentId.trim().toLowerCase() } : {}),
    })),
  );

  rpc.register(
    "cron.get",
    method(z.strictObject({ id: jobId }), async (p) => {
      const j = await cron.getJob(p.id);
      if (!j) return { job: null };
      return { job: await cron.view(j) };
    }),
  );

  rpc.register(
    "cron.add",
    method(
      z.strictObject({ job: z.record(z.string(), z.unknown()), createdBy: z.string().min(1).optional() }),
      async (p) => ({
        job: await cron.add(p.job, p.createdBy ? { createdBy: p.createdBy } : {}),
      }),
    ),
  );

  rpc.register(
    "cron.update",
    method(z.strictObject({ id: jobId, patch: z.record(z.string(), z.unknown()) }), async (p) => ({
      job: await cron.update(p.id, p.patch),
    })),
  );

  rpc.register(
    "cron.remove",
    method(z.strictObject({ id: jobId }), async (p) => {
      await cron.remove(p.id);
      return { removed: true };
    }),
  );

  rpc.register(
    "cron.run",
    method(z.strictObject({ id: jobId }), (p) => cron.runNow(p.id)),
  );

  rpc.register(
    "cron.runs",
    method(z.strictObject({ id: jobId, limit: z.number().int().min(1).max(50).optional() }), async (p) => ({
      runs: (await cron.runs(p.id, p.limit ?? 20)).map((r) => ({
        runId: r.runId,
        status: r.status,
        startedAt: r.startedAt,
        endedAt: r.endedAt ?? null,
        ...(r.durationMs !== undefined ? { durationMs: r.durationMs } : {}),
        ...(r.replyPreview !== undefined ? { replyPreview: r.replyPreview } : {}),
        ...(r.error ? { error: r.error } : {}),
        ...(r.delivery ? { delivery: r.delivery } : {}),
        trigger: r.trigger,
        sessionKey: r.sessionKey,
      })),
    })),
  );
}
