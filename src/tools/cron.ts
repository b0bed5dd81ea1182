import { z } from "zod";
import { parseDurationMs } from "../config/schedule.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import { routeOf } from "../sessions/route.js";
import { defineTool } from "./types.js";

/**
 * `cron`: an agent schedules work for its own chat — a reminder in 20 minutes, a daily summary.
 * Jobs it creates run as its agent and, by default, announce to the chat this session last talked
 * in (`delivery: "last"`). It sees and changes only its own agent's jobs made at run time.
 */

const schema = z.strictObject({
  action: z
    .enum(["add", "list", "remove", "run"])
    .describe("add a job, list your jobs, remove one, or run one now"),
  id: z
    .string()
    .trim()
    .max(64)
    .optional()
    .describe("Job id (lowercase letters, digits, - and _). Generated when adding without one."),
  message: z
    .string()
    .min(1)
    .max(32_000)
    .optional()
    .describe("What you will be asked when the job runs (add), e.g. 'Remind the user to call Bob'."),
  in: z
    .string()
    .optional()
    .describe('One-shot reminder after this long, e.g. "20m", "2h", "1d" (instead of schedule).'),
  schedule: z
    .strictObject({
      cron: z.string().optional().describe('5-field cron expression, e.g. "0 7 * * 1-5"'),
      tz: z.string().optional().describe('IANA time zone for cron, e.g. "Europe/Berlin" (default UTC)'),
      every: z.string().optional().describe('Interval, e.g. "30m"'),
      at: z.string().optional().describe('ISO 8601 time, e.g. "2026-12-24T18:00:00Z"'),
    })
    .optional()
    .describe("Exactly one of cron (+tz), every, at."),
  delivery: z
    .enum(["last", "none"])
    .default("last")
    .describe('"last" posts the result to this chat (default); "none" keeps it in the job\'s session.'),
  session: z
    .enum(["persistent", "isolated"])
    .default("persistent")
    .describe("persistent: one session remembers every run; isolated: a fresh session per run."),
});

export const cronTool = defineTool({
  name: "cron",
  description:
    "Schedule work: a one-shot reminder (`in` or `schedule.at`) or a recurring job (`schedule.cron` with `tz`, or `schedule.every`). The message is given to you when the job runs and your reply is posted to this chat. Reply exactly NO_REPLY in that run to post nothing.",
  schema: () => schema,
  async execute(args, ctx) {
    const { services, caller } = ctx;
    const cron = services.cron;
    if (!cron || !services.config.cron.enabled)
      return { status: "error", error: "cron is disabled on this gateway (cron.enabled)" };
    try {
      if (args.action === "list") {
        const jobs = await cron.list({ agentId: caller.agentId });
        return {
          status: "ok",
          jobs: jobs.map((j) => ({
            id: j.id,
            schedule: j.schedule,
            enabled: j.enabled,
            nextRunAt: j.nextRunAt,
            message: j.message,
            ...(j.lastRun ? { lastRun: j.lastRun } : {}),
          })),
        };
      }
      if (!args.id && args.action !== "add")
        return { status: "error", error: `id: required for ${args.action}` };
      if (args.action === "remove" || args.action === "run") {
        const j = await cron.getJob(args.id ?? "");
        if (!j || j.job.agentId !== caller.agentId)
          return { status: "error", error: `no cron job "${args.id}" of agent ${caller.agentId}` };
        if (args.action === "run") return await cron.runNow(j.job.id, ctx.traceparent);
        await cron.remove(j.job.id);
        return { status: "ok", removed: j.job.id };
      }
      // add
      if (!args.message) return { status: "error", error: "message: required for add" };
      if ((args.in === undefined) === (args.schedule === undefined))
        return { status: "error", error: "give exactly one of `in` or `schedule`" };
      let schedule: Record<string, unknown>;
      if (args.in !== undefined) {
        const ms = parseDurationMs(args.in);
        if (ms === null || ms <= 0)
          return { status: "error", error: `in: "${args.in}" is not a duration like "20m"` };
        schedule = { at: new Date(services.now() + ms).toISOString() };
      } else schedule = { ...args.schedule };
      if (args.delivery === "last" && !routeOf(caller.entry))
        return {
          status: "error",
          error: 'delivery: this session has no chat to post into (delivery "last"); use delivery "none"',
        };
      const job = await cron.add(
        {
          ...(args.id ? { id: args.id } : {}),
          agentId: caller.agentId,
          schedule,
          message: args.message,
          session: args.session,
          delivery:
            args.delivery === "last"
              ? { mode: "announce", to: "last", from: caller.sessionKey }
              : { mode: "none" },
        },
        { createdBy: caller.sessionKey },
      );
      return { status: "ok", job: { id: job.id, schedule: job.schedule, nextRunAt: job.nextRunAt } };
    } catch (err) {
      if (err instanceof SwitchboardError) return { status: "error", error: err.message, code: err.code };
      return { status: "error", error: errorMessage(err) };
    }
  },
});
