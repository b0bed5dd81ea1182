import type { Services } from "../services/index.js";
import { editDecided } from "./gate.js";
import { type ApprovalRecord, ApprovalStore, type Decision } from "./store.js";

/**
 * One decision on an approval, from wherever it comes (a button, `/approve`, a numbered reply,
 * `approvals.resolve`, the dashboard). Only the first decision counts (`ApprovalStore.decide`);
 * the waiting run sees it and goes on. The request message is edited to say who decided what.
 */

export type ResolveOutcome =
  | { ok: true; record: ApprovalRecord }
  | { ok: false; code: "NOT_FOUND" | "FORBIDDEN" | "CONFLICT"; message: string };

export interface Decider {
  /** Who, as shown in the chat: `telegram:111 (Ann)`, `operator`. */
  by: string;
  /** Whether this person may decide (the caller checks against `tools.approvals.approvers`). */
  approver: boolean;
}

export async function resolveApproval(
  services: Pick<Services, "store" | "bus" | "delivery" | "logger" | "now">,
  id: string,
  decision: Decision,
  decider: Decider,
): Promise<ResolveOutcome> {
  const store = new ApprovalStore(services.store);
  const rec = await store.get(id);
  if (!rec) return { ok: false, code: "NOT_FOUND", message: `approval ${id} not found` };
  if (!decider.approver)
    return { ok: false, code: "FORBIDDEN", message: "not yours: only an approver may decide this request" };
  if (rec.status === "decided")
    return { ok: false, code: "CONFLICT", message: `already decided (${rec.decision} by ${rec.decidedBy})` };
  const now = services.now();
  if (rec.expiresAt <= now)
    return { ok: false, code: "CONFLICT", message: "this request has expired (denied: timeout)" };
  if (!(await store.decide(id, decision, decider.by, now))) {
    const cur = await store.get(id);
    return {
      ok: false,
      code: "CONFLICT",
      message: cur?.decision ? `already decided (${cur.decision} by ${cur.decidedBy})` : "already decided",
    };
  }
  if (decision === "allow-always")
    await store.allowAlways({ agentId: rec.agentId, tool: rec.tool, decidedBy: decider.by, at: now });
  const record: ApprovalRecord = {
    ...rec,
    status: "decided",
    decision,
    decidedBy: decider.by,
    decidedAt: now,
  };
  services.bus.emit("approval.resolved", {
    id,
    sessionKey: rec.sessionKey,
    runId: rec.runId,
    tool: rec.tool,
    decision,
  });
  await editDecided(services, record);
  return { ok: true, record };
}
