import { z } from "zod";
import { ApprovalStore, decisionSchema, resolveApproval } from "../../approvals/index.js";
import { SwitchboardError } from "../../errors.js";
import type { Services } from "../../services/index.js";
import { method, type RpcDispatcher } from "../rpc.js";

/**
 * `approvals.list` and `approvals.resolve` (API.md §8.3). The RPC caller holds the gateway token:
 * the operator, an approver of every request. `approvals.list` also shows the stored
 * allow-always rules (`always`).
 */
export function registerApprovalMethods(
  rpc: RpcDispatcher,
  services: Pick<Services, "store" | "bus" | "delivery" | "logger" | "now">,
): void {
  rpc.register(
    "approvals.list",
    method(z.strictObject({ sessionKey: z.string().min(1).optional() }), async (p) => {
      const store = new ApprovalStore(services.store);
      const pending = await store.listPending(services.now(), p.sessionKey);
      return {
        approvals: pending.map((r) => ({
          id: r.id,
          sessionKey: r.sessionKey,
          runId: r.runId,
          tool: r.tool,
          args: r.args,
          requestedAt: r.requestedAt,
          expiresAt: r.expiresAt,
        })),
        always: (await store.listAlways()).map((a) => ({
          agentId: a.agentId,
          tool: a.tool,
          decidedBy: a.decidedBy,
          at: a.at,
        })),
      };
    }),
  );
  rpc.register(
    "approvals.resolve",
    method(z.strictObject({ id: z.string().min(1).max(100), decision: decisionSchema }), async (p) => {
      const res = await resolveApproval(services, p.id, p.decision, { by: "operator", approver: true });
      if (!res.ok) throw new SwitchboardError(res.code, res.message, { details: { id: p.id } });
      return { ok: true };
    }),
  );
}
