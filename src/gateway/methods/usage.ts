import { z } from "zod";
import { SwitchboardError } from "../../errors.js";
import type { Services } from "../../services/index.js";
import { lastDays, MAX_USAGE_DAYS } from "../../usage/counter.js";
import { method, type RpcDispatcher } from "../rpc.js";

const periodSchema = z.enum(["day", "month"]).default("day");

/**
 * `usage.get` and `usage.list` (API.md §8.4): spend of the current UTC day or month, from
 * src/usage/; `usage.list { days }` gives rows per day over the last `days` days (the dashboard's
 * spend chart) with the configured budgets.
 */
export function registerUsageMethods(rpc: RpcDispatcher, services: Pick<Services, "usage" | "now">): void {
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
      z
        .strictObject({
          period: periodSchema,
          by: z.enum(["agent", "session", "channel", "model"]),
          days: z.number().int().min(1).max(MAX_USAGE_DAYS).optional(),
        })
        .superRefine((p, ctx) => {
          if (p.days !== undefined && p.period !== "day")
            ctx.addIssue({ code: "custom", path: ["days"], message: 'goes with period "day" (the default)' });
        }),
      async (p) => {
        const usage = counts();
        if (p.days === undefined) {
          const rows = await usage.list(p.period, p.by);
          return { period: p.period, by: p.by, rows: rows.map((r) => ({ [p.by]: r.key, ...r })) };
        }
        const days = lastDays(p.days, services.now());
        const { rows, budgets } = await usage.daily(p.by, p.days);
        return {
          period: p.period,
          by: p.by,
          days: p.days,
          from: days[0],
          to: days[days.length - 1],
          rows: rows.map((r) => ({ [p.by]: r.key, ...r })),
          budgets,
        };
      },
    ),
  );
}
