import { firstTick, parseInstant } from "../config/schedule.js";
import type { Config } from "../config/schema.js";
import type { CronJob } from "../services/cron.js";
import { normalizeKeyInput } from "../sessions/keys.js";

/**
 * `switchboard doctor` for cron and hooks: every job's schedule (its next run) and delivery
 * target (a configured channel and account), and the hook endpoint's settings. Pure over config.
 */

export interface CronCheck {
  name: string;
  status: "ok" | "warn" | "fail";
  message: string;
}

function channelAccounts(config: Config, channel: string): string[] | null {
  const ch = config.channels;
  switch (channel) {
    case "telegram":
      return ch.telegram ? Object.keys(ch.telegram.accounts) : null;
    case "slack":
      return ch.slack ? Object.keys(ch.slack.accounts) : null;
    case "discord":
      return ch.discord ? Object.keys(ch.discord.accounts) : null;
    case "whatsapp":
      return ch.whatsapp ? Object.keys(ch.whatsapp.accounts) : null;
    case "webchat":
      return ch.webchat.enabled ? ["default"] : null;
    default:
      return null;
  }
}

/** What is wrong with a job's delivery target, or null. */
export function deliveryProblem(config: Config, job: CronJob): string | null {
  const d = job.delivery;
  if (d.mode === "none") return null;
  if (d.to === "last") {
    const n = normalizeKeyInput(d.from ?? "", { agentId: job.agentId, sessionKey: d.from ?? "" });
    return n.kind === "error" ? `delivery.from: ${n.error}` : null;
  }
  const channel = (d.channel ?? "").toLowerCase();
  const accounts = channelAccounts(config, channel);
  if (!accounts || accounts.length === 0)
    return `delivery.channel: ${channel} is not configured (channels.${channel}${channel === "webchat" ? ".enabled" : ".accounts"})`;
  if (d.accountId && !accounts.includes(d.accountId))
    return `delivery.accountId: ${channel} has no account "${d.accountId}" (configured: ${accounts.join(", ")})`;
  return null;
}

export function cronChecks(
  config: Config,
  runtimeJobs: CronJob[] | null,
  now: number = Date.now(),
): CronCheck[] {
  const out: CronCheck[] = [];
  if (!config.cron.enabled)
    out.push({
      name: "cron",
      status: "warn",
      message: "cron.enabled is false: no job fires (cron.* still manages them)",
    });
  const jobs: Array<{ job: CronJob; where: string }> = [
    ...config.cron.jobs.map((job, i) => ({ job, where: `cron.jobs[${i}]` })),
    ...(runtimeJobs ?? []).map((job) => ({ job, where: "run-time job" })),
  ];
  for (const { job, where } of jobs) {
    const name = `cron:${job.id}`;
    const problem = deliveryProblem(config, job);
    if (problem) {
      out.push({ name, status: "fail", message: `${where}.${problem}` });
      continue;
    }
    if (!config.agents.list.some((a) => a.id === job.agentId)) {
      out.push({
        name,
        status: "fail",
        message: `${where}.agentId: agent "${job.agentId}" is not configured`,
      });
      continue;
    }
    const s = job.schedule;
    const next = firstTick(s, now);
    const at = "at" in s ? parseInstant(s.at) : null;
    if ("at" in s && at !== null && at <= now)
      out.push({
        name,
        status: "warn",
        message: `${where}: at ${s.at} has passed (it runs once at start unless it already ran)`,
      });
    else
      out.push({
        name,
        status: "ok",
        message: `${job.enabled ? "next run" : "disabled; would run"} ${next ? new Date(next).toISOString() : "never"}`,
      });
  }
  if (runtimeJobs === null)
    out.push({
      name: "cron:run-time jobs",
      status: "ok",
      message: "not checked here (the gateway holds the store); see `switchboard cron list`",
    });
  if (config.hooks.enabled)
    out.push({
      name: "hooks",
      status: "ok",
      message: `POST /hooks/agent enabled (own token, ${config.hooks.ratePerMinute}/min, body ≤ ${config.hooks.maxBodyBytes} bytes${config.hooks.allowAnySessionKey ? ", any session key" : ""})`,
    });
  return out;
}
