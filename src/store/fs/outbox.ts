import { InvalidParamsError } from "../../errors.js";
import { Journal } from "../../journal/index.js";
import type { Logger } from "../../log.js";
import { KeyedSerial } from "../serial.js";
import type { OutboxLease, OutboxStore } from "../types.js";
import type { WarningSink } from "../warnings.js";

interface OutboxEntry {
  state: "claimed" | "done";
  /** The record (claimed or done) is forgotten at this time: claim time + ttlMs. */
  expiresAt: number;
  /** A lease (`lease`): the claim may be taken again from this time on if it was not marked done. */
  leaseUntil?: number;
  messageIds?: string[];
}

type OutboxRecord = { op: "set"; id: string; entry: OutboxEntry } | { op: "del"; id: string };

/** How long a `complete` without a live claim is remembered. */
const UNCLAIMED_DONE_TTL_MS = 24 * 60 * 60 * 1000;

export interface FsOutboxStoreOptions {
  dir: string;
  logger: Logger;
  warnings: WarningSink;
  compactEveryAppends: number;
  now: () => number;
}

/**
 * Idempotency records journaled to `outbox/outbox.jsonl`. Operations on one id are serialised,
 * so of two concurrent claims exactly one wins. A record lives `ttlMs` from its claim;
 * `complete` keeps that deadline; `release` drops a claim but never a completed send.
 */
export class FsOutboxStore implements OutboxStore {
  private readonly entries = new Map<string, OutboxEntry>();
  private readonly serial = new KeyedSerial();
  private journal!: Journal<OutboxRecord>;

  private constructor(private readonly now: () => number) {}

  static async open(opts: FsOutboxStoreOptions): Promise<FsOutboxStore> {
    const store = new FsOutboxStore(opts.now);
    store.journal = await Journal.open<OutboxRecord>({
      dir: opts.dir,
      name: "outbox",
      logger: opts.logger,
      warnings: opts.warnings,
      compactEveryAppends: opts.compactEveryAppends,
      decode: decodeRecord,
      replay: (r) => store.apply(r),
      snapshot: () => {
        const now = store.now();
        const out: OutboxRecord[] = [];
        for (const [id, entry] of store.entries) {
          if (entry.expiresAt > now) out.push({ op: "set", id, entry });
          else store.entries.delete(id); // expired: pruning memory too changes nothing observable
        }
        return out;
      },
      size: () => store.entries.size,
    });
    const now = opts.now();
    for (const [id, e] of store.entries) if (e.expiresAt <= now) store.entries.delete(id);
    return store;
  }

  claim(id: string, ttlMs: number): Promise<boolean> {
    checkId(id);
    if (!(typeof ttlMs === "number" && ttlMs > 0 && Number.isFinite(ttlMs))) {
      return Promise.reject(new InvalidParamsError("ttlMs: must be a positive number of milliseconds"));
    }
    return this.serial.run(id, async () => {
      if (this.live(id)) return false;
      await this.write({ op: "set", id, entry: { state: "claimed", expiresAt: this.now() + ttlMs } });
      return true;
    });
  }

  lease(id: string, leaseMs: number, keepMs: number): Promise<OutboxLease> {
    checkId(id);
    for (const [field, v] of [
      ["leaseMs", leaseMs],
      ["keepMs", keepMs],
    ] as const) {
      if (!(typeof v === "number" && v > 0 && Number.isFinite(v))) {
        return Promise.reject(new InvalidParamsError(`${field}: must be a positive number of milliseconds`));
      }
    }
    return this.serial.run(id, async (): Promise<OutboxLease> => {
      const now = this.now();
      const e = this.live(id);
      if (e?.state === "done")
        return { acquired: false, state: "done", ...(e.messageIds ? { messageIds: [...e.messageIds] } : {}) };
      const until = e ? (e.leaseUntil ?? e.expiresAt) : 0;
      if (e && until > now) return { acquired: false, state: "leased", retryInMs: until - now };
      const entry: OutboxEntry = {
        state: "claimed",
        expiresAt: now + Math.max(keepMs, leaseMs),
        leaseUntil: now + leaseMs,
      };
      await this.write({ op: "set", id, entry });
      return { acquired: true, expired: e !== undefined };
    });
  }

  complete(id: string, result: { messageIds: string[] }, ttlMs?: number): Promise<void> {
    checkId(id);
    return this.serial.run(id, async () => {
      const expiresAt =
        ttlMs !== undefined && ttlMs > 0
          ? this.now() + ttlMs
          : (this.live(id)?.expiresAt ?? this.now() + UNCLAIMED_DONE_TTL_MS);
      // Written at once, not after the current I/O phase: a crash between the platform's yes
      // and this mark re-sends the message, so the mark must not wait for other callbacks.
      const r: OutboxRecord = {
        op: "set",
        id,
        entry: { state: "done", expiresAt, messageIds: [...result.messageIds] },
      };
      await this.journal.appendNow(r, () => this.apply(r));
    });
  }

  async get(id: string): Promise<{ state: "claimed" | "done"; messageIds?: string[] } | null> {
    const e = this.live(id);
    if (!e) return null;
    return e.messageIds ? { state: e.state, messageIds: [...e.messageIds] } : { state: e.state };
  }

  release(id: string): Promise<void> {
    checkId(id);
    return this.serial.run(id, async () => {
      if (this.live(id)?.state === "claimed") await this.write({ op: "del", id });
    });
  }

  compact(): Promise<void> {
    return this.journal.compact();
  }

  async close(): Promise<void> {
    await this.serial.drain();
    await this.journal.close();
  }

  private live(id: string): OutboxEntry | undefined {
    const e = this.entries.get(id);
    if (e && e.expiresAt <= this.now()) {
      this.entries.delete(id); // expired: same as absent (snapshots skip it too)
      return undefined;
    }
    return e;
  }

  private write(r: OutboxRecord): Promise<void> {
    return this.journal.append(r, () => this.apply(r));
  }

  private apply(r: OutboxRecord): void {
    if (r.op === "set") this.entries.set(r.id, r.entry);
    else this.entries.delete(r.id);
  }
}

function checkId(id: string): void {
  if (typeof id !== "string" || id.length === 0)
    throw new InvalidParamsError("id: must be a non-empty string");
}

function decodeRecord(v: unknown): OutboxRecord | null {
  if (typeof v !== "object" || v === null) return null;
  const r = v as Record<string, unknown>;
  if (typeof r.id !== "string") return null;
  if (r.op === "del") return { op: "del", id: r.id };
  const e = r.entry as Record<string, unknown> | undefined;
  if (r.op !== "set" || typeof e !== "object" || e === null) return null;
  if ((e.state !== "claimed" && e.state !== "done") || typeof e.expiresAt !== "number") return null;
  return { op: "set", id: r.id, entry: e as unknown as OutboxEntry };
}
