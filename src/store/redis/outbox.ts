import type { Redis } from "ioredis";
import { InvalidParamsError } from "../../errors.js";
import { completeOutbox, leaseOutbox, releaseOutbox } from "../../redis/commands/store.js";
import type { ScriptRunner } from "../../redis/scripts.js";
import type { OutboxLease, OutboxStore } from "../types.js";
import type { RedisKeys } from "./keys.js";
import { parseObject } from "./records.js";

/** The stored value of a live claim (compared verbatim by releaseOutbox-1). */
const CLAIMED = JSON.stringify({ state: "claimed" });
/** How long a `complete` without a live claim is remembered (same as the fs driver). */
const UNCLAIMED_DONE_TTL_MS = 24 * 60 * 60 * 1000;

interface OutboxRecord {
  state: "claimed" | "done";
  messageIds?: string[];
}

/**
 * Idempotency records, one string key each. `claim` is `SET NX PX ttl`, so of concurrent
 * claims (from any process) exactly one wins; the record expires `ttlMs` after its claim.
 * `complete` keeps that expiry; `release` drops a claim but never a completed record.
 */
export class RedisOutboxStore implements OutboxStore {
  constructor(
    private readonly client: Redis,
    private readonly keys: RedisKeys,
    private readonly scripts: ScriptRunner,
    private readonly now: () => number = Date.now,
  ) {}

  async claim(id: string, ttlMs: number): Promise<boolean> {
    checkId(id);
    if (!(typeof ttlMs === "number" && ttlMs > 0 && Number.isFinite(ttlMs))) {
      throw new InvalidParamsError("ttlMs: must be a positive number of milliseconds", { field: "ttlMs" });
    }
    const ok = await this.client.set(this.keys.outbox(id), CLAIMED, "PX", Math.ceil(ttlMs), "NX");
    return ok === "OK";
  }

  async lease(id: string, leaseMs: number, keepMs: number): Promise<OutboxLease> {
    checkId(id);
    for (const [field, v] of [
      ["leaseMs", leaseMs],
      ["keepMs", keepMs],
    ] as const) {
      if (!(typeof v === "number" && v > 0 && Number.isFinite(v))) {
        throw new InvalidParamsError(`${field}: must be a positive number of milliseconds`, { field });
      }
    }
    const r = (await this.scripts.run(
      leaseOutbox,
      [this.keys.outbox(id)],
      [this.now(), Math.ceil(leaseMs), Math.ceil(keepMs)],
    )) as [number, string | number, string | number | undefined];
    if (r[0] === 1) return { acquired: true, expired: Number(r[1]) === 1 };
    if (r[1] === "done") {
      const rec = parseObject<OutboxRecord>(String(r[2]));
      return Array.isArray(rec?.messageIds)
        ? { acquired: false, state: "done", messageIds: rec.messageIds }
        : { acquired: false, state: "done" };
    }
    return { acquired: false, state: "leased", retryInMs: Math.max(0, Number(r[2]) || 0) };
  }

  async complete(id: string, result: { messageIds: string[] }, ttlMs?: number): Promise<void> {
    checkId(id);
    const done: OutboxRecord = { state: "done", messageIds: [...result.messageIds] };
    await this.scripts.run(
      completeOutbox,
      [this.keys.outbox(id)],
      [JSON.stringify(done), UNCLAIMED_DONE_TTL_MS, ttlMs !== undefined && ttlMs > 0 ? Math.ceil(ttlMs) : ""],
    );
  }

  async get(id: string): Promise<{ state: "claimed" | "done"; messageIds?: string[] } | null> {
    checkId(id);
    const r = parseObject<OutboxRecord>(await this.client.get(this.keys.outbox(id)));
    if (r === null || (r.state !== "claimed" && r.state !== "done")) return null;
    return Array.isArray(r.messageIds) ? { state: r.state, messageIds: r.messageIds } : { state: r.state };
  }

  async release(id: string): Promise<void> {
    checkId(id);
    await this.scripts.run(releaseOutbox, [this.keys.outbox(id)], [CLAIMED]);
  }
}

function checkId(id: string): void {
  if (typeof id !== "string" || id.length === 0)
    throw new InvalidParamsError("id: must be a non-empty string");
}
