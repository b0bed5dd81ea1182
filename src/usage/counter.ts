import type { Logger } from "../log.js";
import { USAGE_TOTALS_NS } from "../store/kv-namespaces.js";
import type { KeyValueStore } from "../store/types.js";
import { type BudgetPeriod, periodKey } from "./ledger.js";

/** What `usage.get` / `usage.list` report for one scope and period (API.md §8.4). */
export interface UsageTotals {
  costUsd: number;
  tokens: { input: number; output: number };
  runs: number;
}

export type UsageDimension = "agent" | "session" | "channel" | "model";

/** One row of `usage.list`: the totals of one agent / session / channel / model. */
export type UsageRow = UsageTotals & { key: string };

/** One row of `usage.list { days }`: one key's totals on one UTC day (`2026-12-06`). */
export type DailyUsageRow = UsageRow & { day: string };

/** One finished turn, as counted. */
export interface CountedTurn {
  agentId: string;
  sessionKey: string;
  channel?: string;
  model?: string;
  costUsd: number;
  input: number;
  output: number;
  /** false: spend that is not a run of its own (a compaction's call), counted without adding to `runs`. */
  run?: boolean;
}

/**
 * The counts of finished turns per period (UTC day and month) and scope (`global`,
 * `agent:<id>`, `session:<key>`, `channel:<name>`, `model:<ref>`). Two drivers: `UsageCounter`
 * (this process's memory, persisted to the fs store's kv) and `RedisUsageCounts` (shared by every
 * gateway and worker on one Redis).
 */
export interface UsageCounts {
  /** Counts a finished turn (or a compaction's spend). Synchronous and cheap: it is on every turn's path. */
  add(turn: CountedTurn): void;
  /** A scope's totals in the period containing now. */
  get(scope: string, period: BudgetPeriod): Promise<UsageTotals>;
  /** One row per key of `by` with spend in the period containing now, costliest first. */
  list(period: BudgetPeriod, by: UsageDimension): Promise<UsageRow[]>;
  /** Rows per UTC day for the last `days` days up to today: oldest day first, costliest first within a day. */
  daily(by: UsageDimension, days: number): Promise<DailyUsageRow[]>;
  /** Writes what is not yet stored and stops (the app calls it after the last turn ended). */
  close(): Promise<void>;
}

const DAY_MS = 86_400_000;
/** How long day and month totals of agents, channels, models and the global scope are kept after their period. */
export const USAGE_RETENTION_DAYS = 400;
/** How long per-session totals are kept after their period (there is one row per session). */
export const SESSION_USAGE_RETENTION_DAYS = 7;
/** The most days `usage.list { days }` reads back. */
export const MAX_USAGE_DAYS = USAGE_RETENTION_DAYS;

const PERIODS: readonly BudgetPeriod[] = ["day", "month"];

/** The scopes a turn counts under. */
export function scopesOf(turn: CountedTurn): string[] {
  const scopes = ["global", `agent:${turn.agentId}`, `session:${turn.sessionKey}`];
  if (turn.channel) scopes.push(`channel:${turn.channel}`);
  if (turn.model) scopes.push(`model:${turn.model}`);
  return scopes;
}

/** When a period key (`day:2026-12-06`, `month:2026-12`) ends, ms; NaN for anything else. */
export function periodKeyEnd(pk: string): number {
  const day = /^day:(\d{4})-(\d{2})-(\d{2})$/.exec(pk);
  if (day) return Date.UTC(Number(day[1]), Number(day[2]) - 1, Number(day[3]) + 1);
  const month = /^month:(\d{4})-(\d{2})$/.exec(pk);
  if (month) return Date.UTC(Number(month[1]), Number(month[2]), 1);
  return Number.NaN;
}

/** Until when totals of a period ending at `end` are kept (per-session ones for less), ms. */
export function keptUntil(end: number, session: boolean): number {
  return end + (session ? SESSION_USAGE_RETENTION_DAYS : USAGE_RETENTION_DAYS) * DAY_MS;
}

/** The UTC days (`2026-12-06`) of the last `days` days up to the one containing `now`, oldest first. */
export function lastDays(days: number, now: number): string[] {
  const out: string[] = [];
  for (let i = days - 1; i >= 0; i--) out.push(new Date(now - i * DAY_MS).toISOString().slice(0, 10));
  return out;
}

/** Costliest first, then most tokens, then by key. */
export function byCost(a: UsageRow, b: UsageRow): number {
  return (
    b.costUsd - a.costUsd ||
    b.tokens.input + b.tokens.output - (a.tokens.input + a.tokens.output) ||
    a.key.localeCompare(b.key)
  );
}

function empty(): UsageTotals {
  return { costUsd: 0, tokens: { input: 0, output: 0 }, runs: 0 };
}

function copy(t: UsageTotals): UsageTotals {
  return { costUsd: t.costUsd, tokens: { ...t.tokens }, runs: t.runs };
}

/** A stored row (kv value): flat, so a damaged one is easy to tell. */
interface StoredTotals {
  costUsd: number;
  input: number;
  output: number;
  runs: number;
}

function decode(v: unknown): UsageTotals | null {
  if (typeof v !== "object" || v === null) return null;
  const r = v as Record<string, unknown>;
  const n = (x: unknown) => typeof x === "number" && Number.isFinite(x) && x >= 0;
  if (!n(r.costUsd) || !n(r.input) || !n(r.output) || !n(r.runs)) return null;
  const s = r as unknown as StoredTotals;
  return { costUsd: s.costUsd, tokens: { input: s.input, output: s.output }, runs: s.runs };
}

export interface UsageCounterOptions {
  now?: () => number;
  /**
   * Where the totals persist (the fs store's kv, namespace `usage.totals`): `open` loads them,
   * changed rows are written every `flushMs` and by `close`. Without it, memory only.
   */
  kv?: KeyValueStore;
  /** Default 2000. */
  flushMs?: number;
  logger?: Logger;
}

/**
 * Totals in this process's memory, for every period still retained: day and month rows of the
 * global scope, agents, channels and models for `USAGE_RETENTION_DAYS` after their period, of
 * sessions for `SESSION_USAGE_RETENTION_DAYS`; older ones are dropped when a new day starts.
 * With a `kv` (embedded driver) the rows a turn changed are written in one batch every `flushMs`
 * (one kv journal line per changed row; a turn itself writes nothing), and on `close`: a crash or
 * SIGKILL loses at most the turns of the last `flushMs`.
 */
export class UsageCounter implements UsageCounts {
  /** period key → scope → totals. */
  readonly #tables = new Map<string, Map<string, UsageTotals>>();
  /** `<period key>|<scope>` changed since the last write, or dropped (no longer in `#tables`). */
  #dirty = new Set<string>();
  /** The day of the last pruning (`day:…`). */
  #pruned = "";
  readonly #now: () => number;
  readonly #kv: KeyValueStore | undefined;
  readonly #logger: Logger | undefined;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();

  constructor(opts: UsageCounterOptions = {}) {
    this.#now = opts.now ?? Date.now;
    this.#kv = opts.kv;
    this.#logger = opts.logger;
    if (this.#kv !== undefined) {
      this.#timer = setInterval(() => void this.flush(), opts.flushMs ?? 2000);
      this.#timer.unref();
    }
  }

  /** A counter with the totals `opts.kv` holds (rows past their retention are deleted). */
  static async open(opts: UsageCounterOptions & { kv: KeyValueStore }): Promise<UsageCounter> {
    const c = new UsageCounter(opts);
    let skipped = 0;
    for (const { key, value } of await opts.kv.list<unknown>(USAGE_TOTALS_NS)) {
      const bar = key.indexOf("|");
      const totals = decode(value);
      if (bar < 0 || totals === null || Number.isNaN(periodKeyEnd(key.slice(0, bar)))) {
        skipped++;
        continue;
      }
      c.#table(key.slice(0, bar)).set(key.slice(bar + 1), totals);
    }
    if (skipped > 0) opts.logger?.warn({ skipped }, "usage counts: unreadable rows skipped");
    c.#prune();
    return c;
  }

  #table(pk: string): Map<string, UsageTotals> {
    let t = this.#tables.get(pk);
    if (t === undefined) {
      t = new Map();
      this.#tables.set(pk, t);
    }
    return t;
  }

  /** Once a day: drops rows past their retention (and marks them for deletion from the kv). */
  #prune(): void {
    const now = this.#now();
    const today = periodKey("day", now);
    if (today === this.#pruned) return;
    this.#pruned = today;
    for (const [pk, table] of this.#tables) {
      const end = periodKeyEnd(pk);
      for (const scope of table.keys()) {
        if (keptUntil(end, scope.startsWith("session:")) > now) continue;
        table.delete(scope);
        if (this.#kv) this.#dirty.add(`${pk}|${scope}`);
      }
      if (table.size === 0) this.#tables.delete(pk);
    }
  }

  add(turn: CountedTurn): void {
    this.#prune();
    const at = this.#now();
    const scopes = scopesOf(turn);
    for (const period of PERIODS) {
      const pk = periodKey(period, at);
      const table = this.#table(pk);
      for (const scope of scopes) {
        let t = table.get(scope);
        if (t === undefined) {
          t = empty();
          table.set(scope, t);
        }
        t.costUsd += turn.costUsd;
        t.tokens.input += turn.input;
        t.tokens.output += turn.output;
        if (turn.run !== false) t.runs += 1;
        if (this.#kv) this.#dirty.add(`${pk}|${scope}`);
      }
    }
  }

  async get(scope: string, period: BudgetPeriod): Promise<UsageTotals> {
    this.#prune();
    const t = this.#tables.get(periodKey(period, this.#now()))?.get(scope);
    return t ? copy(t) : empty();
  }

  #rows(pk: string, by: UsageDimension): UsageRow[] {
    const prefix = `${by}:`;
    const rows: UsageRow[] = [];
    for (const [scope, t] of this.#tables.get(pk) ?? []) {
      if (scope.startsWith(prefix)) rows.push({ key: scope.slice(prefix.length), ...copy(t) });
    }
    return rows.sort(byCost);
  }

  async list(period: BudgetPeriod, by: UsageDimension): Promise<UsageRow[]> {
    this.#prune();
    return this.#rows(periodKey(period, this.#now()), by);
  }

  async daily(by: UsageDimension, days: number): Promise<DailyUsageRow[]> {
    this.#prune();
    return lastDays(days, this.#now()).flatMap((day) =>
      this.#rows(`day:${day}`, by).map((r) => ({ day, ...r })),
    );
  }

  /** Writes the changed rows (and deletes the dropped ones) to the kv; one write at a time. */
  flush(): Promise<void> {
    this.#writing = this.#writing.then(() => this.#write());
    return this.#writing;
  }

  async #write(): Promise<void> {
    const kv = this.#kv;
    if (kv === undefined || this.#dirty.size === 0) return;
    const ids = this.#dirty;
    this.#dirty = new Set();
    const writes = [...ids].map(async (id) => {
      const bar = id.indexOf("|");
      const t = this.#tables.get(id.slice(0, bar))?.get(id.slice(bar + 1));
      try {
        if (t === undefined) await kv.delete(USAGE_TOTALS_NS, id);
        else {
          const row: StoredTotals = {
            costUsd: t.costUsd,
            input: t.tokens.input,
            output: t.tokens.output,
            runs: t.runs,
          };
          await kv.set(USAGE_TOTALS_NS, id, row);
        }
        return true;
      } catch {
        this.#dirty.add(id); // written again next time
        return false;
      }
    });
    const failed = (await Promise.all(writes)).filter((ok) => !ok).length;
    if (failed > 0)
      this.#logger?.warn({ failed }, "usage counts: rows not written; retrying on the next flush");
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }
}
