export { approvalActions, approvalIdFor, type GateInput, guardToolCall } from "./gate.js";
export { approvalVerdict, argGlobMatches, type ToolTraits } from "./policy.js";
export { type Decider, type ResolveOutcome, resolveApproval } from "./resolve.js";
export {
  type AlwaysRule,
  type ApprovalRecord,
  ApprovalStore,
  DECISIONS,
  type Decision,
  decisionSchema,
  pendingApprovalsCount,
} from "./store.js";
