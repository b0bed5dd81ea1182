import { randomUUID } from "node:crypto";
import { backoffMs, parseDurationMs } from "../config/schedule.js";
import { type CronJobConfig, cronJobSchema } from "../config/schema.js";
import { formatIssues, InvalidParamsError, NotFoundError, SwitchboardError } from "../errors.js";
import { uuidFrom } from "../ids.js";
import type { CronTurnMeta } from "../pipeline/turn-meta.js";
import type {
  CronDriver,
  CronJob,
  CronJobState,
  CronJobs,
  CronJobView,
  CronRunEntry,
  StoredCronJob,
  Tick,
} from "../services/cron.js";
import type { Services } from "../services/index.js";
import { cronKey, mainKey, normalizeKeyInput } from "../sessions/keys.js";
import { ensureSession, resolveSessionRef } from "../sessions/service.js";
import { CRON_JOBS_NS, CRON_STATE_NS, cronRunsNs } from "../store/kv-namespaces.js";
import { linkMeta } from "../telemetry/index.js";

export type { CronJobView } from "../services/cron.js";

/**
 * The cron service: the job set (config `cron.jobs` + jobs created at run time, kept in the store's
 * kv), what a tick does (a turn in `cron:<id>` or a fresh `cron:<id>:run:<uuid>`), per-job state
 * (failures, backoff, last run) and the run log. The same for both drivers; only *when* a tick
 * fires is the driver's. Every effect of a tick is keyed by its run id `cron-<id>-<tickAt>`, so a
 * tick delivered twice (crash, two processes) is one run.
 */

/** Run-log lines kept per job (newest). */
export const RUN_LOG_KEEP = 50;
export const REPLY_PREVIEW_CHARS = 200;
/** How often isolated run sessions older than `cron.sessionRetention` are pruned. */
const PRUNE_EVERY_MS = 10 * 60_000;

export function isolatedRunKey(jobId: string, runId: string): string {
  return `${cronKey(jobId)}:run:${uuidFrom(runId)}`;
}

function padTick(n: number): string {
  return String(Math.max(0, Math.floor(n))).padStart(15, "0");
}

/**
 * What the cron service uses: the job set and its state (store kv), the job checks (config,
 * models), the run sessions (created with bus and clock) and their turns (pipeline).
 */
export type CronDeps = Pick<Services, "config" | "models" | "logger" | "now" | "store" | "pipeline" | "bus">;

export class CronService implements CronJobs {
  #driver: CronDriver | null = null;
  #pruneCancel: (() => void) | null = null;

  constructor(private readonly services: CronDeps) {}

  get driverName(): string {
    return this.#driver?.name ?? "off";
  }

  // ─── lifecycle ─────────────────────────────────────────────────────────────────────────────

  async start(driver: CronDriver): Promise<void> {
    this.#driver = driver;
    const jobs: CronJob[] = [];
    for (const j of await this.allJobs()) {
      if (await this.#finished(j.job)) continue;
      jobs.push(j.job);
    }
    await driver.start(jobs, (tick) => this.fire(tick).then(() => undefined));
    void this.pruneIsolated().catch((err) => this.services.logger.warn({ err }, "cron: prune failed"));
    const timer = setInterval(() => {
      void this.pruneIsolated().catch((err) => this.services.logger.warn({ err }, "cron: prune failed"));
    }, PRUNE_EVERY_MS);
    timer.unref();
    this.#pruneCancel = () => clearInterval(timer);
  }

  async stop(): Promise<void> {
    this.#pruneCancel?.();
    this.#pruneCancel = null;
    await this.#driver?.stop();
    this.#driver = null;
  }

  // ─── jobs ──────────────────────────────────────────────────────────────────────────────────

  configJobs(): CronJob[] {
    return this.services.config.cron.jobs;
  }

  async allJobs(): Promise<Array<{ job: CronJob; source: "config" | "runtime"; createdBy?: string }>> {
    const out: Array<{ job: CronJob; source: "config" | "runtime"; createdBy?: string }> =
      this.configJobs().map((job) => ({ job, source: "config" }));
    const fromConfig = new Set(out.map((j) => j.job.id));
    const stored = await this.services.store.kv.list<StoredCronJob>(CRON_JOBS_NS);
    stored.sort((a, b) => a.value.createdAt - b.value.createdAt);
    for (const { value } of stored) {
      if (fromConfig.has(value.job.id)) continue;
      out.push({
        job: value.job,
        source: "runtime",
        ...(value.createdBy ? { createdBy: value.createdBy } : {}),
      });
    }
    return out;
  }

  async getJob(
    id: string,
  ): Promise<{ job: CronJob; source: "config" | "runtime"; createdBy?: string } | null> {
    const key = id.trim().toLowerCase();
    const cfg = this.configJobs().find((j) => j.id === key);
    if (cfg) return { job: cfg, source: "config" };
    const stored = await this.services.store.kv.get<StoredCronJob>(CRON_JOBS_NS, key);
    return stored
      ? { job: stored.job, source: "runtime", ...(stored.createdBy ? { createdBy: stored.createdBy } : {}) }
      : null;
  }

  async #requireJob(id: string) {
    const j = await this.getJob(id);
    if (!j) throw new NotFoundError("cron job", id);
    return j;
  }

  async view(j: { job: CronJob; source: "config" | "runtime"; createdBy?: string }): Promise<CronJobView> {
    const state = await this.state(j.job.id);
    const { job } = j;
    return {
      id: job.id,
      agentId: job.agentId,
      schedule: job.schedule,
      enabled: job.enabled,
      nextRunAt: job.enabled && this.#driver && !state.done ? await this.#driver.nextRunAt(job.id) : null,
      ...(state.lastRun
        ? {
            lastRun: {
              status: state.lastRun.status,
              at: state.lastRun.at,
              ...(state.lastRun.durationMs !== undefined ? { durationMs: state.lastRun.durationMs } : {}),
            },
          }
        : {}),
      message: job.message,
      ...(job.model ? { model: job.model } : {}),
      session: job.session,
      delivery: job.delivery,
      catchUp: job.catchUp,
      ...("at" in job.schedule ? { deleteAfterRun: job.deleteAfterRun ?? true } : {}),
      source: j.source,
      ...(j.createdBy ? { createdBy: j.createdBy } : {}),
      failures: state.failures,
      ...(state.backoffUntil !== undefined && state.backoffUntil > this.services.now()
        ? { backoffUntil: state.backoffUntil }
        : {}),
    };
  }

  async list(filter?: { agentId?: string }): Promise<CronJobView[]> {
    const out: CronJobView[] = [];
    for (const j of await this.allJobs()) {
      if (filter?.agentId && j.job.agentId !== filter.agentId) continue;
      out.push(await this.view(j));
    }
    return out;
  }

  /** Validates a job (schema, agent, model, delivery source) and fills its id. Errors name the field. */
  async #validate(input: unknown, prefix: string): Promise<CronJob> {
    const raw = input && typeof input === "object" ? { ...(input as Record<string, unknown>) } : input;
    if (raw && typeof raw === "object" && !("id" in raw))
      (raw as Record<string, unknown>).id = randomUUID().slice(0, 8);
    const parsed = cronJobSchema.safeParse(raw);
    if (!parsed.success) throw new InvalidParamsError(formatIssues(parsed.error.issues, prefix));
    const job = parsed.data;
    const { config, models } = this.services;
    if (!config.agents.list.some((a) => a.id === job.agentId))
      throw new InvalidParamsError(
        `${prefix}agentId: agent "${job.agentId}" is not configured (agents.list)`,
      );
    if (job.model) {
      models.resolve(job.model);
      if (!models.isAllowed(job.model))
        throw new SwitchboardError(
          "FORBIDDEN",
          `${prefix}model: ${job.model} is not allowed (models.allowed)`,
        );
    }
    if (job.delivery.mode === "announce" && job.delivery.to === "last" && job.delivery.from) {
      // As every session argument: `main` is the job's agent's main session, which always exists.
      const from = await resolveSessionRef(this.services, job.delivery.from, {
        agentId: job.agentId,
        sessionKey: mainKey(job.agentId),
      });
      if (!from.ok)
        throw new InvalidParamsError(`${prefix}delivery.from: ${from.error} (its last chat is the target)`);
      job.delivery.from = from.entry.key;
    }
    return job;
  }

  async add(input: unknown, opts: { createdBy?: string } = {}): Promise<CronJobView> {
    const job = await this.#validate(input, "job.");
    if (await this.getJob(job.id))
      throw new SwitchboardError(
        "CONFLICT",
        `job.id: a cron job "${job.id}" already exists (cron.update changes it)`,
      );
    const rec: StoredCronJob = {
      job,
      createdAt: this.services.now(),
      ...(opts.createdBy ? { createdBy: opts.createdBy } : {}),
    };
    await this.services.store.kv.set(CRON_JOBS_NS, job.id, rec);
    await this.services.store.kv.delete(CRON_STATE_NS, job.id);
    await this.#driver?.put(job);
    return this.view({ job, source: "runtime", ...(opts.createdBy ? { createdBy: opts.createdBy } : {}) });
  }

  async update(id: string, patch: Record<string, unknown>): Promise<CronJobView> {
    const cur = await this.#requireJob(id);
    if (cur.source === "config")
      throw new SwitchboardError(
        "FORBIDDEN",
        `cron job "${cur.job.id}" is defined in the config file (cron.jobs); edit it there`,
      );
    if ("id" in patch)
      throw new InvalidParamsError("patch.id: a job's id cannot change (remove it and add a new one)");
    const job = await this.#validate({ ...cur.job, ...patch, id: cur.job.id }, "patch.");
    const stored = await this.services.store.kv.get<StoredCronJob>(CRON_JOBS_NS, job.id);
    await this.services.store.kv.set(CRON_JOBS_NS, job.id, {
      ...(stored ?? { createdAt: this.services.now() }),
      job,
    });
    if ("schedule" in patch) {
      const st = await this.state(job.id);
      await this.#putState(job.id, { failures: st.failures, ...(st.lastRun ? { lastRun: st.lastRun } : {}) });
    }
    await this.#driver?.put(job);
    return this.view({ ...cur, job });
  }

  async remove(id: string): Promise<void> {
    const cur = await this.#requireJob(id);
    if (cur.source === "config")
      throw new SwitchboardError(
        "FORBIDDEN",
        `cron job "${cur.job.id}" is defined in the config file (cron.jobs); remove it there`,
      );
    await this.#forget(cur.job.id);
  }

  async #forget(jobId: string): Promise<void> {
    await this.services.store.kv.delete(CRON_JOBS_NS, jobId);
    await this.services.store.kv.delete(CRON_STATE_NS, jobId);
    await this.#driver?.remove(jobId);
  }

  // ─── state and run log ─────────────────────────────────────────────────────────────────────

  async state(jobId: string): Promise<CronJobState> {
    return (await this.services.store.kv.get<CronJobState>(CRON_STATE_NS, jobId)) ?? { failures: 0 };
  }

  async #putState(jobId: string, st: CronJobState): Promise<void> {
    await this.services.store.kv.set(CRON_STATE_NS, jobId, st);
  }

  async #finished(job: CronJob): Promise<boolean> {
    if (!("at" in job.schedule)) return false;
    return (await this.state(job.id)).done === true;
  }

  async runs(jobId: string, limit = 20): Promise<CronRunEntry[]> {
    const j = await this.getJob(jobId);
    const id = j?.job.id ?? jobId.trim().toLowerCase();
    const all = await this.services.store.kv.list<CronRunEntry>(cronRunsNs(id));
    if (!j && all.length === 0) throw new NotFoundError("cron job", jobId);
    all.sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
    const out = all.slice(0, Math.max(1, Math.min(RUN_LOG_KEEP, limit))).map((e) => e.value);
    // Queued lines whose run has started or ended since: report the run record's status.
    for (const e of out) {
      if (e.status !== "queued") continue;
      const rec = await this.services.store.runs.get(e.runId);
      if (rec?.status === "running" && rec.startedAt) e.startedAt = rec.startedAt;
    }
    return out;
  }

  async #logRun(entry: CronRunEntry): Promise<void> {
    const ns = cronRunsNs(entry.jobId);
    await this.services.store.kv.set(ns, `${padTick(entry.tickAt)}|${entry.runId}`, entry);
    const all = await this.services.store.kv.list<CronRunEntry>(ns);
    if (all.length <= RUN_LOG_KEEP) return;
    all.sort((a, b) => (a.key < b.key ? -1 : 1));
    for (const e of all.slice(0, all.length - RUN_LOG_KEEP)) await this.services.store.kv.delete(ns, e.key);
  }

  async #runEntry(jobId: string, tickAt: number, runId: string): Promise<CronRunEntry | null> {
    return this.services.store.kv.get<CronRunEntry>(cronRunsNs(jobId), `${padTick(tickAt)}|${runId}`);
  }

  // ─── ticks ─────────────────────────────────────────────────────────────────────────────────

  /**
   * One tick: skipped when the job is gone/disabled, when it is late and `catchUp` is `skip`, or
   * while it backs off; otherwise its turn is durably accepted. Idempotent per (job, tick).
   */
  async fire(
    tick: Tick & { trigger?: "manual"; cause?: string },
  ): Promise<{ runId: string; sessionKey: string } | null> {
    const { services } = this;
    const log = services.logger.child({ cronJob: tick.jobId, tickAt: tick.tickAt });
    const j = await this.getJob(tick.jobId);
    const manual = tick.trigger === "manual";
    if (!j) {
      log.info("cron: tick of a job that no longer exists; unscheduling it");
      await this.#driver?.remove(tick.jobId);
      return null;
    }
    const { job } = j;
    if (!job.enabled && !manual) return null;
    const state = await this.state(job.id);
    if (!manual) {
      if ("at" in job.schedule && state.done) return null;
      if (state.lastTick !== undefined && tick.tickAt < state.lastTick && !tick.retry) return null;
      if (!tick.retry && state.backoffUntil !== undefined && tick.tickAt < state.backoffUntil) {
        log.info({ backoffUntil: state.backoffUntil }, "cron: tick skipped while backing off after failures");
        return null;
      }
    }
    const trigger: CronRunEntry["trigger"] = manual
      ? "manual"
      : tick.retry
        ? "retry"
        : tick.late
          ? "catch-up"
          : "schedule";
    const runId = manual
      ? `cron-${job.id}-manual-${randomUUID()}`
      : `cron-${job.id}-${tick.tickAt}${tick.retry ? "-retry" : ""}`;
    const sessionKey = job.session === "isolated" ? isolatedRunKey(job.id, runId) : cronKey(job.id);
    if (!manual && tick.late && job.catchUp === "skip") {
      log.info("cron: missed tick skipped (catchUp: skip)");
      if (!(await this.#runEntry(job.id, tick.tickAt, runId))) {
        const now = services.now();
        await this.#logRun({
          runId,
          jobId: job.id,
          sessionKey,
          tickAt: tick.tickAt,
          trigger,
          status: "skipped",
          startedAt: now,
          endedAt: now,
          error: "missed while the gateway was down (catchUp: skip)",
        });
      }
      await this.#putState(job.id, {
        ...state,
        lastTick: tick.tickAt,
        ...("at" in job.schedule ? { done: true } : {}),
      });
      return null;
    }
    const existing = await this.#runEntry(job.id, tick.tickAt, runId);
    const entry = await ensureSession(services, sessionKey, {
      agentId: job.agentId,
      displayName: `cron ${job.id}`,
      ...(job.model ? { model: job.model } : {}),
    });
    if (job.model && entry.model !== job.model)
      await services.store.sessions.patch(entry.key, { model: job.model });
    if (!existing) {
      await this.#logRun({
        runId,
        jobId: job.id,
        sessionKey,
        tickAt: tick.tickAt,
        trigger,
        status: "queued",
        startedAt: services.now(),
      });
    }
    const meta: CronTurnMeta = { jobId: job.id, tickAt: tick.tickAt, trigger };
    await services.pipeline.submitTurn({
      sessionKey,
      agentId: job.agentId,
      text: job.message,
      provenance: { kind: "cron", sourceTool: "cron", senderName: job.id },
      deliver: false,
      origin: "cron",
      runId,
      extraSystem: `This turn was started by the scheduled job "${job.id}" (${describeSchedule(job.schedule)}), not by a person typing. ${job.delivery.mode === "announce" ? "Your final reply is posted to the job's chat; reply exactly NO_REPLY to post nothing." : "Your reply is not posted anywhere."}`,
      meta: { cron: meta, ...linkMeta(tick.cause) },
    });
    if (!manual && (state.lastTick === undefined || tick.tickAt > state.lastTick))
      await this.#putState(job.id, { ...(await this.state(job.id)), lastTick: tick.tickAt });
    return { runId, sessionKey };
  }

  /** `cron.run`: one run now, whatever the schedule (also of a disabled job); see CronService.runNow. */
  async runNow(id: string, cause?: string): Promise<{ runId: string; status: "accepted" }> {
    const j = await this.#requireJob(id);
    const res = await this.fire({
      jobId: j.job.id,
      tickAt: this.services.now(),
      late: false,
      trigger: "manual",
      ...(cause ? { cause } : {}),
    });
    if (!res) throw new SwitchboardError("INTERNAL", `cron job ${j.job.id} could not be started`);
    return { runId: res.runId, status: "accepted" };
  }

  /**
   * After the turn (the flow calls this once per run, possibly again after a crash): the run log
   * line, the failure count and backoff, and for `at` jobs deletion after success or a retry.
   */
  async finish(
    meta: CronTurnMeta,
    run: {
      runId: string;
      sessionKey: string;
      status: CronRunEntry["status"];
      reply?: string;
      error?: string;
      delivery?: string;
    },
  ): Promise<void> {
    const { services } = this;
    const now = services.now();
    const prev = await this.#runEntry(meta.jobId, meta.tickAt, run.runId);
    if (prev && prev.status !== "queued") return; // already finished (re-run after a crash)
    const rec = await services.store.runs.get(run.runId);
    const startedAt = rec?.startedAt ?? prev?.startedAt ?? now;
    const entry: CronRunEntry = {
      runId: run.runId,
      jobId: meta.jobId,
      sessionKey: run.sessionKey,
      tickAt: meta.tickAt,
      trigger: meta.trigger,
      status: run.status,
      startedAt,
      endedAt: now,
      durationMs: Math.max(0, now - startedAt),
      ...(run.reply ? { replyPreview: preview(run.reply) } : {}),
      ...(run.error ? { error: run.error } : {}),
      ...(run.delivery ? { delivery: run.delivery } : {}),
    };
    await this.#logRun(entry);
    const j = await this.getJob(meta.jobId);
    if (!j) return;
    const st = await this.state(meta.jobId);
    const ok = run.status === "ok";
    const lastRun = { runId: run.runId, status: run.status, at: now, durationMs: entry.durationMs ?? 0 };
    // A manual run (cron.run) is reported but leaves the failure count and the backoff alone.
    if (meta.trigger === "manual") {
      await this.#putState(meta.jobId, { ...st, lastRun });
      return;
    }
    const failures = ok ? 0 : st.failures + 1;
    const next: CronJobState = {
      failures,
      ...(st.lastTick !== undefined ? { lastTick: st.lastTick } : {}),
      ...(st.done ? { done: true } : {}),
      lastRun,
    };
    if (!ok) next.backoffUntil = now + backoffMs(failures);
    const isAt = "at" in j.job.schedule;
    if (isAt) {
      if (ok) {
        if (j.job.deleteAfterRun !== false && j.source === "runtime") {
          await this.#forget(j.job.id);
          return;
        }
        next.done = true;
      } else if (failures <= 5) {
        await this.#driver?.retryAt(j.job.id, now + backoffMs(failures));
      } else next.done = true;
    }
    await this.#putState(meta.jobId, next);
  }

  // ─── isolated sessions ─────────────────────────────────────────────────────────────────────

  /** Removes isolated run sessions (`cron:<id>:run:<uuid>`) not updated within `cron.sessionRetention`. */
  async pruneIsolated(): Promise<number> {
    const { services } = this;
    const retention = parseDurationMs(services.config.cron.sessionRetention) ?? 86_400_000;
    const cutoff = services.now() - retention;
    const rows = await services.store.sessions.list({ kinds: ["cron"], limit: 10_000, search: ":run:" });
    let n = 0;
    for (const e of rows) {
      if (!/^cron:[^:]+:run:/.test(e.key) || e.updatedAt > cutoff) continue;
      const active = (await services.pipeline.queueInfo(e.key)).activeRunId;
      if (active) continue;
      await services.store.transcripts.archive({ agentId: e.agentId, sessionId: e.sessionId }, "deleted");
      await services.store.sessions.delete(e.key);
      n++;
    }
    return n;
  }
}

/**
 * The session whose last chat a `to: "last"` job announces to: `from` as written (config jobs are
 * not checked when added), with `main` read as the job's agent's main session.
 */
export function deliveryFromKey(job: CronJob): string | undefined {
  const from = job.delivery.from;
  if (from === undefined) return undefined;
  const n = normalizeKeyInput(from, { agentId: job.agentId, sessionKey: mainKey(job.agentId) });
  return n.kind === "key" ? n.key : from;
}

function preview(text: string): string {
  const t = text.trim().replace(/\s+/g, " ");
  return t.length > REPLY_PREVIEW_CHARS ? `${t.slice(0, REPLY_PREVIEW_CHARS - 1)}…` : t;
}

export function describeSchedule(s: CronJobConfig["schedule"]): string {
  if ("cron" in s) return `cron "${s.cron}" in ${s.tz ?? "UTC"}`;
  if ("every" in s) return `every ${s.every}`;
  return `at ${s.at}`;
}
