import type { Redis } from "ioredis";
import type { Logger } from "../log.js";
import { usageAdd } from "../redis/commands/usageAdd-10.js";
import { ScriptRunner } from "../redis/scripts.js";
import type { RedisKeys } from "../store/redis/keys.js";
import {
  byCost,
  type CountedTurn,
  type DailyUsageRow,
  keptUntil,
  lastDays,
  type UsageCounts,
  type UsageDimension,
  type UsageRow,
  type UsageTotals,
} from "./counter.js";
import { type BudgetPeriod, periodEnd, periodKey } from "./ledger.js";

const DIMENSIONS = ["global", "agent", "session", "channel", "model"] as const;
type Dimension = (typeof DIMENSIONS)[number];

/** `global` → ["global", ""]; `agent:main` → ["agent", "main"]; anything else → null. */
function splitScope(scope: string): [Dimension, string] | null {
  if (scope === "global") return ["global", ""];
  const colon = scope.indexOf(":");
  const dim = scope.slice(0, colon) as Dimension;
  return colon > 0 && DIMENSIONS.includes(dim) && dim !== "global" ? [dim, scope.slice(colon + 1)] : null;
}

/** A usage hash (`<id>|c`, `|i`, `|o`, `|r` fields) as one row per id. */
function rowsOf(hash: Record<string, string>): UsageRow[] {
  const byId = new Map<string, UsageRow>();
  for (const [field, value] of Object.entries(hash)) {
    const bar = field.lastIndexOf("|");
    if (bar < 0) continue;
    const key = field.slice(0, bar);
    let row = byId.get(key);
    if (row === undefined) {
      row = { key, costUsd: 0, tokens: { input: 0, output: 0 }, runs: 0 };
      byId.set(key, row);
    }
    const n = Number(value);
    if (!Number.isFinite(n)) continue;
    switch (field.slice(bar + 1)) {
      case "c":
        row.costUsd = n;
        break;
      case "i":
        row.tokens.input = n;
        break;
      case "o":
        row.tokens.output = n;
        break;
      case "r":
        row.runs = n;
        break;
    }
  }
  return [...byId.values()].sort(byCost);
}

/**
 * The usage counts in Redis (storage.driver "redis"), so every gateway and worker counts into and
 * reads the same totals. One hash per period and dimension (`RedisKeys.usage`); a finished turn is
 * one script (`usageAdd-10`: HINCRBYFLOAT / HINCRBY on up to ten hashes and their expiry), sent
 * without waiting on the turn's path; `close` waits for the ones in flight. Hashes expire
 * `USAGE_RETENTION_DAYS` after their period ends (per-session hashes `SESSION_USAGE_RETENTION_DAYS`).
 */
export class RedisUsageCounts implements UsageCounts {
  readonly #scripts: ScriptRunner;
  readonly #inflight = new Set<Promise<unknown>>();
  readonly #now: () => number;
  readonly #logger: Logger | undefined;

  constructor(
    private readonly client: Redis,
    private readonly keys: RedisKeys,
    opts: { now?: () => number; logger?: Logger } = {},
  ) {
    this.#scripts = new ScriptRunner(client, "usage counts");
    this.#now = opts.now ?? Date.now;
    this.#logger = opts.logger;
  }

  add(turn: CountedTurn): void {
    const at = this.#now();
    const ids: Record<Dimension, string | undefined> = {
      global: "",
      agent: turn.agentId,
      session: turn.sessionKey,
      channel: turn.channel || undefined,
      model: turn.model || undefined,
    };
    const keys: string[] = [];
    const args: Array<string | number> = [
      turn.costUsd.toFixed(12),
      Math.round(turn.input),
      Math.round(turn.output),
      turn.run === false ? 0 : 1,
    ];
    for (const period of ["day", "month"] as const) {
      const pk = periodKey(period, at);
      const end = periodEnd(period, at);
      for (const dim of DIMENSIONS) {
        keys.push(this.keys.usage(pk, dim));
        const id = ids[dim];
        args.push(id === undefined ? "" : `+${id}`, keptUntil(end, dim === "session"));
      }
    }
    const p = this.#scripts.run(usageAdd, keys, args).catch((err: unknown) => {
      this.#logger?.warn({ err }, "usage counts: a turn was not counted in Redis");
    });
    this.#inflight.add(p);
    void p.finally(() => this.#inflight.delete(p));
  }

  async get(scope: string, period: BudgetPeriod): Promise<UsageTotals> {
    const split = splitScope(scope);
    if (split === null) return { costUsd: 0, tokens: { input: 0, output: 0 }, runs: 0 };
    const [dim, id] = split;
    const [c, i, o, r] = await this.client.hmget(
      this.keys.usage(periodKey(period, this.#now()), dim),
      `${id}|c`,
      `${id}|i`,
      `${id}|o`,
      `${id}|r`,
    );
    const n = (v: string | null | undefined) => (v ? Number(v) || 0 : 0);
    return { costUsd: n(c), tokens: { input: n(i), output: n(o) }, runs: n(r) };
  }

  async list(period: BudgetPeriod, by: UsageDimension): Promise<UsageRow[]> {
    return rowsOf(await this.client.hgetall(this.keys.usage(periodKey(period, this.#now()), by)));
  }

  async daily(by: UsageDimension, days: number): Promise<DailyUsageRow[]> {
    const dayList = lastDays(days, this.#now());
    const pipe = this.client.pipeline();
    for (const day of dayList) pipe.hgetall(this.keys.usage(`day:${day}`, by));
    const replies = (await pipe.exec()) ?? [];
    return dayList.flatMap((day, i) => {
      const [err, hash] = replies[i] ?? [new Error("no reply"), null];
      if (err) throw err;
      return rowsOf(hash as Record<string, string>).map((r) => ({ day, ...r }));
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.#inflight]);
  }
}
