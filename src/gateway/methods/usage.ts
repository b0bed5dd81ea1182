import { z } from "zod";
import { SwitchboardError } from "../../errors.js";
import type { Services } from "../../services/index.js";
import { method, type RpcDispatcher } from "../rpc.js";

const periodSchema = z.enum(["day", "month"]).default("day");

/** `usage.get` and `usage.list` (API.md §8.4): spend of the current UTC day or month, from src/usage/. */
export function registerUsageMethods(rpc: RpcDispatcher, services: Pick<Services, "usage">): void {
  const counts = () => {
    if (!services.usage)
      throw new SwitchboardError("UNAVAILABLE", "usage counting is not running in this process");
    return services.usage;
  };

  rpc.register(
    "usage.get",
    method(
      z.strictObject({
        scope: z
          .string()
          .regex(
            /^(global|agent:\S+|session:\S+|channel:\S+|model:\S+)$/,
            'must be "global", "agent:<id>", "session:<key>", "channel:<name>" or "model:<ref>"',
          )
          .default("global"),
        period: periodSchema,
      }),
      async (p) => counts().get(p.scope, p.period),
    ),
  );

  rpc.register(
    "usage.list",
    method(
      z.strictObject({
        period: periodSchema,
        by: z.enum(["agent", "session", "channel", "model"]),
      }),
      async (p) => ({
        period: p.period,
        by: p.by,
        rows: counts()
          .list(p.period, p.by)
          .map((r) => ({ [p.by]: r.key, ...r })),
      }),
    ),
  );
}
