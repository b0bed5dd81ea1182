import { z } from "zod";
import type { Services } from "../../services/index.js";
import { method, type RpcDispatcher } from "../rpc.js";

/** `health` and `agents.list` (API.md §4). */
export function registerHealthMethods(
  rpc: RpcDispatcher,
  deps: Pick<Services, "config" | "models"> & { health: () => Promise<Record<string, unknown>> },
): void {
  rpc.register(
    "health",
    method(z.object({}), () => deps.health()),
  );

  rpc.register(
    "agents.list",
    method(z.object({}), async () => ({
      agents: deps.config.agents.list.map((a) => ({
        id: a.id,
        name: a.name ?? a.id,
        model: deps.models.modelFor(a.id),
      })),
    })),
  );
}
