import type { Redis } from "ioredis";
import { errorMessage } from "../../errors.js";
import type { Logger } from "../../log.js";
import { closeClient } from "../../redis/close.js";
import { FINAL_RUN_STATUSES, type RunRecord } from "../../store/types.js";
import { type BusMessage, busMessageSchema, parseStored } from "./schema.js";

/**
 * The pipeline's pub/sub side: one subscriber connection (from `createBlockingConnection`, owned and
 * closed here) on `{tag}:bus`, created on first need (wait, onRunEvent, start).
 * Pub/sub is at-most-once, so nothing relies on it alone: waiters subscribe BEFORE reading the run
 * record, re-read records after a reconnect, and read again when they time out; cancels also leave
 * a persistent flag that the worker checks.
 */
export class Bus {
  private sub: Redis | null = null;
  private ready: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly create: () => Redis,
    private readonly channel: string,
    private readonly logger: Logger,
    private readonly onMessage: (msg: BusMessage) => void,
    /** Called after a reconnect: messages may have been missed meanwhile. */
    private readonly onReconnect: () => void,
  ) {}

  /** Resolves once subscribed; a failed attempt is retried by the next call. */
  ensure(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.ready ??= this.connect().catch((err: unknown) => {
      this.ready = null;
      const sub = this.sub;
      this.sub = null;
      sub?.disconnect();
      throw err;
    });
    return this.ready;
  }

  private async connect(): Promise<void> {
    const sub = this.create();
    this.sub = sub;
    let readyOnce = false;
    sub.on("error", (err: unknown) =>
      this.logger.warn({ err: errorMessage(err) }, "bullmq pipeline: bus connection error"),
    );
    sub.on("ready", () => {
      if (readyOnce) this.onReconnect();
      readyOnce = true;
    });
    sub.on("message", (channel: string, raw: string) => {
      if (channel !== this.channel) return;
      const msg = parseStored(busMessageSchema, raw);
      if (!msg) {
        this.logger.warn({ channel }, "bullmq pipeline: unreadable bus message ignored");
        return;
      }
      this.onMessage(msg);
    });
    await sub.subscribe(this.channel);
    readyOnce = true;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.ready?.catch(() => undefined);
    const sub = this.sub;
    this.sub = null;
    if (!sub) return;
    await closeClient(sub);
  }
}

/** This process's `wait` callers, by runId. */
export class Waiters {
  private readonly byRun = new Map<string, Set<(run: RunRecord | null) => void>>();

  add(runId: string, fn: (run: RunRecord | null) => void): () => void {
    let set = this.byRun.get(runId);
    if (!set) {
      set = new Set();
      this.byRun.set(runId, set);
    }
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0 && this.byRun.get(runId) === set) this.byRun.delete(runId);
    };
  }

  /** Hands a final record to everyone waiting for it. */
  settle(run: RunRecord): void {
    if (!FINAL_RUN_STATUSES.has(run.status)) return;
    const set = this.byRun.get(run.runId);
    if (set) for (const fn of [...set]) fn(run);
  }

  runIds(): string[] {
    return [...this.byRun.keys()];
  }
}
