import type { ToolRegistry } from "../../agent/tool-registry.js";
import type { Services } from "../../services/index.js";
import type { RpcDispatcher } from "../rpc.js";
import { registerApprovalMethods } from "./approvals.js";
import { registerChatMethods } from "./chat.js";
import { registerCronMethods } from "./cron.js";
import { registerDashboardMethods } from "./dashboard.js";
import { registerHealthMethods } from "./health.js";
import { registerPairingMethods } from "./pairing.js";
import { registerRunMethods } from "./runs.js";
import { registerReadMethods, registerSessionWriteMethods } from "./sessions.js";
import { registerSessionResetMethods } from "./sessions-reset.js";
import { registerToolMethods } from "./tools.js";
import { registerUsageMethods } from "./usage.js";

/**
 * The RPC methods of API.md §4, one file per group. A new group gets its own file here and one
 * line below.
 */

export { requireSession } from "./common.js";
export { registerReadMethods } from "./sessions.js";

export interface MethodDeps {
  services: Services;
  tools: ToolRegistry;
  health: () => Promise<Record<string, unknown>>;
}

export function registerMethods(rpc: RpcDispatcher, deps: MethodDeps): void {
  const { services, tools } = deps;
  registerHealthMethods(rpc, { config: services.config, models: services.models, health: deps.health });
  registerReadMethods(rpc, services);
  registerSessionWriteMethods(rpc, services);
  registerSessionResetMethods(rpc, services);
  registerRunMethods(rpc, services);
  registerChatMethods(rpc, services);
  registerToolMethods(rpc, services, tools);
  registerDashboardMethods(rpc, services);
  if (services.cron) registerCronMethods(rpc, services.cron);
  registerPairingMethods(rpc, services);
  registerApprovalMethods(rpc, services);
  registerUsageMethods(rpc, services);
}
