import { type Command, Option } from "commander";
import { parseDurationMs } from "../../config/schedule.js";
import { SwitchboardError } from "../../errors.js";
import { type CliContext, clientFor, configOpt, numberFlag, tokenOpt, urlOpt } from "../context.js";

/**
 * `switchboard cron list|show|add|edit|rm|run|runs` (API.md §7) over the `cron.*` RPC methods of
 * the running gateway.
 */

interface JobView {
  id: string;
  agentId: string;
  enabled: boolean;
  schedule: Record<string, string>;
  nextRunAt: number | null;
  lastRun?: { status: string; at: number; durationMs?: number };
  message: string;
  delivery: Record<string, string>;
  session: string;
  source: string;
  failures: number;
}

const when = (ms: number | null | undefined) => (ms ? new Date(ms).toISOString() : "-");

function scheduleText(s: Record<string, string>): string {
  if (s.cron) return `cron "${s.cron}" ${s.tz ?? "UTC"}`;
  if (s.every) return `every ${s.every}`;
  return `at ${s.at}`;
}

function deliveryText(d: Record<string, string>): string {
  if (d.mode === "none") return "none";
  if (d.to === "last") return `last chat of ${d.from}`;
  return `${d.channel}:${d.to}${d.accountId ? ` (${d.accountId})` : ""}${d.threadId ? ` thread ${d.threadId}` : ""}`;
}

function jobOptions(cmd: Command): Command {
  return cmd
    .option("--message <text>", "what the agent is asked on each run")
    .option("--cron <expr>", 'cron expression, e.g. "0 7 * * *"')
    .option("--tz <zone>", 'IANA time zone for --cron (default UTC), e.g. "Europe/Berlin"')
    .option("--every <duration>", 'interval, e.g. "30m"')
    .option("--at <time>", 'one-shot ISO 8601 time, e.g. "2026-12-24T18:00:00Z"')
    .option("--in <duration>", 'one-shot after this long, e.g. "20m"')
    .option("--agent <id>", "agent that runs the job")
    .option("--model <ref>", "model override (provider/model)")
    .addOption(new Option("--session <mode>", "session mode").choices(["persistent", "isolated"]))
    .option("--channel <name>", "announce to this channel (with --to)")
    .option("--to <id>", 'chat id to announce to, or "last" (with --from)')
    .option("--from <sessionKey>", "with --to last: the session whose last chat receives the reply")
    .option("--account <id>", "channel account for --channel")
    .option("--thread <id>", "thread id for --channel")
    .option("--no-delivery", "post the reply nowhere")
    .addOption(new Option("--catch-up <mode>", "a tick missed while down").choices(["once", "skip"]))
    .option("--keep", "keep an --at job after it ran (deleteAfterRun false)")
    .option("--disable", "create or set the job disabled")
    .option("--enable", "set the job enabled")
    .option("--json", "print machine-readable JSON");
}

/** The job fields the options name (only those given). */
function jobFields(opts: Record<string, unknown>, now: number): Record<string, unknown> {
  const f: Record<string, unknown> = {};
  const str = (k: string) => (typeof opts[k] === "string" ? (opts[k] as string) : undefined);
  if (str("message")) f.message = str("message");
  if (str("cron")) f.schedule = { cron: str("cron"), ...(str("tz") ? { tz: str("tz") } : {}) };
  if (str("every")) f.schedule = { every: str("every") };
  if (str("at")) f.schedule = { at: str("at") };
  if (str("in")) {
    const ms = parseDurationMs(str("in") ?? "");
    if (ms === null)
      throw new SwitchboardError("INVALID_PARAMS", `--in: "${str("in")}" is not a duration like "20m"`);
    f.schedule = { at: new Date(now + ms).toISOString() };
  }
  if (str("agent")) f.agentId = str("agent");
  if (str("model")) f.model = str("model");
  if (str("session")) f.session = str("session");
  if (str("catchUp")) f.catchUp = str("catchUp");
  if (opts.keep) f.deleteAfterRun = false;
  if (opts.disable) f.enabled = false;
  if (opts.enable) f.enabled = true;
  if (opts.delivery === false) f.delivery = { mode: "none" };
  else if (str("to")) {
    f.delivery =
      str("to") === "last"
        ? { mode: "announce", to: "last", ...(str("from") ? { from: str("from") } : {}) }
        : {
            mode: "announce",
            to: str("to"),
            ...(str("channel") ? { channel: str("channel") } : {}),
            ...(str("account") ? { accountId: str("account") } : {}),
            ...(str("thread") ? { threadId: str("thread") } : {}),
          };
  }
  return f;
}

const common = (cmd: Command): Command =>
  cmd.addOption(urlOpt()).addOption(tokenOpt()).addOption(configOpt());
const client = clientFor;

export function registerCron(program: Command, ctx: CliContext): void {
  const cron = program.command("cron").description("scheduled agent jobs on the running gateway");
  registerReads(cron, ctx);
  registerWrites(cron, ctx);
  registerRunLog(cron, ctx);
}

/** `cron list|show`. */
function registerReads(cron: Command, { io, setCode }: CliContext): void {
  common(cron.command("list").description("list jobs with their next run and last status"))
    .option("--json", "print machine-readable JSON")
    .action(async (opts) => {
      const res = await client(opts).call<{ jobs: JobView[] }>("cron.list");
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      if (res.jobs.length === 0) return io.out("no cron jobs");
      for (const j of res.jobs)
        io.out(
          `${j.id.padEnd(16)} ${j.enabled ? "on " : "off"}  next ${when(j.nextRunAt).padEnd(24)}  last ${(j.lastRun?.status ?? "-").padEnd(8)}  ${scheduleText(j.schedule)} → ${deliveryText(j.delivery)}`,
        );
    });

  common(cron.command("show <id>").description("one job in full"))
    .option("--json", "print machine-readable JSON")
    .action(async (id: string, opts) => {
      const res = await client(opts).call<{ job: JobView | null }>("cron.get", { id });
      if (!res.job) {
        io.err(`no cron job "${id}"`);
        return setCode(1);
      }
      if (opts.json) return io.out(JSON.stringify(res.job, null, 2));
      const j = res.job;
      io.out(
        [
          `id:        ${j.id} (${j.source})`,
          `agent:     ${j.agentId}`,
          `enabled:   ${j.enabled}`,
          `schedule:  ${scheduleText(j.schedule)}`,
          `next run:  ${when(j.nextRunAt)}`,
          `last run:  ${j.lastRun ? `${j.lastRun.status} at ${when(j.lastRun.at)}` : "-"}`,
          `failures:  ${j.failures}`,
          `session:   ${j.session}`,
          `delivery:  ${deliveryText(j.delivery)}`,
          `message:   ${j.message}`,
        ].join("\n"),
      );
    });
}

/** `cron add|edit|rm|run`. */
function registerWrites(cron: Command, { io, setCode }: CliContext): void {
  common(
    jobOptions(
      cron.command("add [id]").description("create a job (at run time; config jobs live in cron.jobs)"),
    ),
  ).action(async (id: string | undefined, opts) => {
    const job = { ...(id ? { id } : {}), ...jobFields(opts, Date.now()) };
    const res = await client(opts).call<{ job: JobView }>("cron.add", { job });
    if (opts.json) return io.out(JSON.stringify(res, null, 2));
    io.out(`added ${res.job.id}: ${scheduleText(res.job.schedule)}, next run ${when(res.job.nextRunAt)}`);
  });

  common(jobOptions(cron.command("edit <id>").description("change a job made at run time"))).action(
    async (id: string, opts) => {
      const patch = jobFields(opts, Date.now());
      if (Object.keys(patch).length === 0) {
        io.err("nothing to change: give at least one option (see --help)");
        return setCode(1);
      }
      const res = await client(opts).call<{ job: JobView }>("cron.update", { id, patch });
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      io.out(`updated ${res.job.id}: ${scheduleText(res.job.schedule)}, next run ${when(res.job.nextRunAt)}`);
    },
  );

  common(cron.command("rm <id>").description("remove a job made at run time"))
    .option("--json", "print machine-readable JSON")
    .action(async (id: string, opts) => {
      const res = await client(opts).call<{ removed: true }>("cron.remove", { id });
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      io.out(`removed ${id}`);
    });

  common(cron.command("run <id>").description("run a job now, whatever its schedule"))
    .option("--json", "print machine-readable JSON")
    .action(async (id: string, opts) => {
      const res = await client(opts).call<{ runId: string; status: string }>("cron.run", { id });
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      io.out(`accepted: run ${res.runId} (switchboard runs wait ${res.runId})`);
    });
}

/** `cron runs <id>`. */
function registerRunLog(cron: Command, { io }: CliContext): void {
  common(cron.command("runs <id>").description("a job's run log: status, duration, reply preview"))
    .option("--limit <n>", "at most N runs (1..50, default 20)")
    .option("--json", "print machine-readable JSON")
    .action(async (id: string, opts) => {
      const res = await client(opts).call<{
        runs: Array<{
          runId: string;
          status: string;
          startedAt: number;
          durationMs?: number;
          replyPreview?: string;
          error?: string;
        }>;
      }>("cron.runs", {
        id,
        ...(opts.limit
          ? { limit: numberFlag("--limit", opts.limit, { min: 1, max: 50, integer: true }) }
          : {}),
      });
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      if (res.runs.length === 0) return io.out("no runs yet");
      for (const r of res.runs)
        io.out(
          `${when(r.startedAt)}  ${r.status.padEnd(8)} ${r.durationMs !== undefined ? `${r.durationMs}ms`.padStart(8) : "       -"}  ${r.replyPreview ?? r.error ?? ""}`,
        );
    });
}
