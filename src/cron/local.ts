import { firstTick, nextTickAfter, scheduleSignature } from "../config/schedule.js";
import { MAX_TIMER_MS } from "../deadlines.js";
import type { Logger } from "../log.js";
import type { CronDriver, CronJob, TickHandler } from "../services/cron.js";
import { CRON_NEXT_NS, CRON_RETRY_NS } from "../store/kv-namespaces.js";
import type { KeyValueStore } from "../store/types.js";

/**
 * The embedded scheduler (`queue.driver: "local"`). The next tick of every job is journaled in the
 * store's kv (fs driver: the state dir) *after* the tick's turn is durably accepted, and the turn's
 * run id is derived from the tick: a crash between the two re-fires the same tick with the same
 * run id, which the pipeline ignores. So a restart neither loses nor doubles a tick. A tick that
 * fell due while the process was down fires once at start with `late: true` (missed ticks
 * collapse into one, as BullMQ's do).
 */

/** After a tick handler failed (store or queue unavailable), try again this much later. */
const HANDLER_RETRY_MS = 5_000;
/** Ticks handled per wake-up at most (bounds one pass of the loop). */
const MAX_TICKS_PER_PASS = 1000;

export interface Clock {
  now(): number;
  /** Calls `fn` after `ms`; returns a cancel function. */
  setTimer(fn: () => void, ms: number): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref();
    return () => clearTimeout(t);
  },
};

interface NextRecord {
  at: number;
  sig: string;
}

interface RetryRecord {
  jobId: string;
  at: number;
}

export class LocalCronDriver implements CronDriver {
  readonly name = "local" as const;
  readonly #jobs = new Map<string, CronJob>();
  readonly #next = new Map<string, NextRecord>();
  readonly #retries = new Map<string, RetryRecord>();
  #onTick: TickHandler | null = null;
  #cancelTimer: (() => void) | null = null;
  #pass: Promise<void> | null = null;
  #startedAt = 0;
  #stopped = false;
  /** Not before this instant after a failed handler (backs off a broken store). */
  #holdUntil = 0;

  constructor(private readonly opts: { kv: KeyValueStore; logger: Logger; clock?: Clock }) {}

  get #clock(): Clock {
    return this.opts.clock ?? systemClock;
  }

  async start(jobs: CronJob[], onTick: TickHandler): Promise<void> {
    if (this.#onTick) return;
    this.#onTick = onTick;
    this.#stopped = false;
    this.#startedAt = this.#clock.now();
    const { kv } = this.opts;
    for (const { key, value } of await kv.list<NextRecord>(CRON_NEXT_NS)) this.#next.set(key, value);
    for (const { key, value } of await kv.list<RetryRecord>(CRON_RETRY_NS)) this.#retries.set(key, value);
    const wanted = new Set(jobs.map((j) => j.id));
    for (const id of [...this.#next.keys()]) if (!wanted.has(id)) await this.#dropNext(id);
    for (const job of jobs) await this.#schedule(job);
    this.#arm();
  }

  async put(job: CronJob): Promise<void> {
    await this.#schedule(job);
    this.#arm();
  }

  async remove(jobId: string): Promise<void> {
    this.#jobs.delete(jobId);
    await this.#dropNext(jobId);
    for (const [k, r] of [...this.#retries]) {
      if (r.jobId !== jobId) continue;
      this.#retries.delete(k);
      await this.opts.kv.delete(CRON_RETRY_NS, k);
    }
    this.#arm();
  }

  async retryAt(jobId: string, atMs: number): Promise<void> {
    const key = `${jobId}|${atMs}`;
    if (this.#retries.has(key)) return;
    const rec = { jobId, at: atMs };
    await this.opts.kv.set(CRON_RETRY_NS, key, rec);
    this.#retries.set(key, rec);
    this.#arm();
  }

  async nextRunAt(jobId: string): Promise<number | null> {
    let best = this.#jobs.has(jobId) ? (this.#next.get(jobId)?.at ?? null) : null;
    for (const r of this.#retries.values())
      if (r.jobId === jobId && (best === null || r.at < best)) best = r.at;
    return best;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancelTimer?.();
    this.#cancelTimer = null;
    await this.#pass;
    this.#onTick = null;
    this.#jobs.clear();
  }

  /** Resolves when no pass is running (tests on a fake clock await this after advancing). */
  async settled(): Promise<void> {
    for (let i = 0; i < 100 && this.#pass; i++) await this.#pass;
  }

  // ─── internals ─────────────────────────────────────────────────────────────────────────────

  async #schedule(job: CronJob): Promise<void> {
    if (!job.enabled) {
      this.#jobs.delete(job.id);
      await this.#dropNext(job.id);
      return;
    }
    this.#jobs.set(job.id, job);
    const sig = scheduleSignature(job.schedule);
    const cur = this.#next.get(job.id);
    if (cur && cur.sig === sig) return; // unchanged: keep the journaled tick (restart-safe)
    const at = firstTick(job.schedule, this.#clock.now());
    if (at === null) {
      await this.#dropNext(job.id);
      return;
    }
    const rec = { at, sig };
    await this.opts.kv.set(CRON_NEXT_NS, job.id, rec);
    this.#next.set(job.id, rec);
  }

  async #dropNext(jobId: string): Promise<void> {
    if (!this.#next.delete(jobId)) return;
    await this.opts.kv.delete(CRON_NEXT_NS, jobId);
  }

  #earliest(): number | null {
    let best: number | null = null;
    for (const [id, r] of this.#next) if (this.#jobs.has(id) && (best === null || r.at < best)) best = r.at;
    for (const r of this.#retries.values()) if (best === null || r.at < best) best = r.at;
    return best;
  }

  #arm(): void {
    if (this.#stopped || !this.#onTick) return;
    if (this.#pass) return; // the running pass re-arms when it ends
    this.#cancelTimer?.();
    this.#cancelTimer = null;
    const at = this.#earliest();
    if (at === null) return;
    const wait = Math.max(at, this.#holdUntil) - this.#clock.now();
    if (wait <= 0) {
      this.#runPass();
      return;
    }
    this.#cancelTimer = this.#clock.setTimer(
      () => {
        this.#cancelTimer = null;
        this.#arm();
      },
      Math.min(wait, MAX_TIMER_MS),
    );
  }

  #runPass(): void {
    this.#pass = this.#fireDue()
      .catch((err) => this.opts.logger.error({ err }, "cron: scheduler pass failed"))
      .finally(() => {
        this.#pass = null;
        this.#arm();
      });
  }

  /** Fires every due tick, oldest first; each tick's next is journaled only after its handler resolved. */
  async #fireDue(): Promise<void> {
    const onTick = this.#onTick;
    if (!onTick) return;
    for (let n = 0; n < MAX_TICKS_PER_PASS && !this.#stopped; n++) {
      const now = this.#clock.now();
      const due = this.#dueOne(now);
      if (!due) return;
      try {
        if (due.kind === "retry") {
          await onTick({
            jobId: due.rec.jobId,
            tickAt: due.rec.at,
            late: due.rec.at < this.#startedAt,
            retry: true,
          });
          this.#retries.delete(due.key);
          await this.opts.kv.delete(CRON_RETRY_NS, due.key);
          continue;
        }
        const job = this.#jobs.get(due.jobId);
        if (!job) continue;
        await onTick({ jobId: job.id, tickAt: due.rec.at, late: due.rec.at < this.#startedAt });
        // The job may have been replaced or removed while its tick ran: journal only if unchanged.
        if (this.#next.get(job.id) !== due.rec) continue;
        const next = nextTickAfter(job.schedule, Math.max(due.rec.at, this.#clock.now()));
        if (next === null) await this.#dropNext(job.id);
        else {
          const rec = { at: next, sig: due.rec.sig };
          await this.opts.kv.set(CRON_NEXT_NS, job.id, rec);
          this.#next.set(job.id, rec);
        }
      } catch (err) {
        this.opts.logger.warn(
          { err, jobId: due.kind === "retry" ? due.rec.jobId : due.jobId },
          "cron: tick not accepted; retrying shortly",
        );
        this.#holdUntil = this.#clock.now() + HANDLER_RETRY_MS;
        return;
      }
    }
  }

  #dueOne(
    now: number,
  ):
    | { kind: "next"; jobId: string; rec: NextRecord }
    | { kind: "retry"; key: string; rec: RetryRecord }
    | null {
    let best:
      | { kind: "next"; jobId: string; rec: NextRecord }
      | { kind: "retry"; key: string; rec: RetryRecord }
      | null = null;
    for (const [jobId, rec] of this.#next)
      if (rec.at <= now && this.#jobs.has(jobId) && (!best || rec.at < best.rec.at))
        best = { kind: "next", jobId, rec };
    for (const [key, rec] of this.#retries)
      if (rec.at <= now && (!best || rec.at < best.rec.at)) best = { kind: "retry", key, rec };
    return best;
  }
}
