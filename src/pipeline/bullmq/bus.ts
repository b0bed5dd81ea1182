import type { Redis } from "ioredis";
import { errorMessage } from "../../errors.js";
import type { Logger } from "../../log.js";
import { closeClient } from "../../redis/close.js";
import { FINAL_RUN_STATUSES, type RunRecord } from "../../store/types.js";
import { type BusMessage, busMessageSchema, parseStored } from "./schema.js";

/** The bus's two channels (keys.ts): cancel/steer, and run events. */
export interface BusChannels {
  control: string;
  runs: string;
}

/**
 * The pipeline's pub/sub side: one subscriber connection (from `createBlockingConnection`, owned and
 * closed here), created on first need. `ensure` subscribes to `{tag}:bus` (cancel and steer: every
 * started pipeline listens); `ensureRuns` to `{tag}:bus:runs` as well (run events: only a process
 * with run listeners or waiters asks, so a finished turn wakes no worker that would drop it).
 * Pub/sub is at-most-once, so nothing relies on it alone: waiters subscribe BEFORE reading the run
 * record, re-read records after a reconnect, and read again when they time out; cancels also leave
 * a persistent flag that the worker checks.
 *
 * `listening()` tells whether no run event can have been missed since the last confirmed subscribe:
 * it is the connection's generation while the run-events subscription stands, null while it is
 * down, being re-established, or was never asked for. Every lost connection starts a new generation.
 */
export class Bus {
  private sub: Redis | null = null;
  private ready: Promise<void> | null = null;
  private runsReady: Promise<void> | null = null;
  private closed = false;
  /** Bumped by every lost connection. */
  private generation = 0;
  /** The generation in which the run-events subscription was last confirmed. */
  private runsGeneration: number | null = null;

  constructor(
    private readonly create: () => Redis,
    private readonly channels: BusChannels,
    private readonly logger: Logger,
    private readonly onMessage: (msg: BusMessage) => void,
    /** Called after a reconnect: messages may have been missed meanwhile. */
    private readonly onReconnect: () => void,
    /**
     * Messages beginning with this are this process's own run events (`eventPrefix`): it told its
     * listeners already, so they are dropped unparsed (a run record's JSON per turn).
     */
    private readonly ownPrefix?: string,
  ) {}

  /** Resolves once subscribed to cancel/steer; a failed attempt is retried by the next call. */
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

  /** `ensure`, and resolves once run events are heard too (from then on, for good). */
  ensureRuns(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.runsReady ??= this.ensure()
      .then(() => this.subscribeRuns())
      .catch((err: unknown) => {
        this.runsReady = null;
        throw err;
      });
    return this.runsReady;
  }

  private async subscribeRuns(): Promise<void> {
    const sub = this.sub;
    if (!sub) throw new Error("bullmq pipeline: the bus connection is gone");
    const generation = this.generation;
    await sub.subscribe(this.channels.runs);
    if (this.generation === generation && this.sub === sub) this.runsGeneration = generation;
  }

  private async connect(): Promise<void> {
    const sub = this.create();
    this.sub = sub;
    let readyOnce = false;
    sub.on("error", (err: unknown) =>
      this.logger.warn({ err: errorMessage(err) }, "bullmq pipeline: bus connection error"),
    );
    sub.on("close", () => {
      this.generation++;
    });
    sub.on("ready", () => {
      if (readyOnce) {
        this.onReconnect();
        // ioredis re-subscribes on its own; run events count as heard again once Redis confirmed it
        if (this.runsReady) this.subscribeRuns().catch(() => undefined);
      }
      readyOnce = true;
    });
    sub.on("message", (channel: string, raw: string) => {
      if (channel !== this.channels.control && channel !== this.channels.runs) return;
      if (this.ownPrefix !== undefined && raw.startsWith(this.ownPrefix)) return;
      const msg = parseStored(busMessageSchema, raw);
      if (!msg) {
        this.logger.warn({ channel }, "bullmq pipeline: unreadable bus message ignored");
        return;
      }
      this.onMessage(msg);
    });
    await sub.subscribe(this.channels.control);
    readyOnce = true;
  }

  /** The current generation while run events are heard with nothing missed since; null otherwise. */
  listening(): number | null {
    return !this.closed && this.runsGeneration === this.generation ? this.generation : null;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.ready?.catch(() => undefined);
    await this.runsReady?.catch(() => undefined);
    const sub = this.sub;
    this.sub = null;
    if (!sub) return;
    await closeClient(sub);
  }
}

/** Runs remembered as accepted-and-unfinished at most (the oldest are forgotten first). */
const MAX_EXPECTED = 10_000;

/**
 * This process's `wait` callers, by runId, and the runs this process accepted while the bus was
 * listening (`expect`): the finish of such a run reaches `settle` (over the bus, or from this
 * process's own worker), so until then a wait knows the run is unfinished without reading its
 * record. A forgotten or settled run, or one accepted in another bus generation, is read as before.
 */
export class Waiters {
  private readonly byRun = new Map<string, Set<(run: RunRecord | null) => void>>();
  private readonly expected = new Map<string, number>();

  /** `runId` is about to be pushed while the bus listens in `generation`. */
  expect(runId: string, generation: number): void {
    this.expected.delete(runId);
    this.expected.set(runId, generation);
    if (this.expected.size > MAX_EXPECTED) {
      const oldest = this.expected.keys().next().value;
      if (oldest !== undefined) this.expected.delete(oldest);
    }
  }

  /** Its push did not happen (duplicate or failure): its record must be read. */
  forget(runId: string): void {
    this.expected.delete(runId);
  }

  /**
   * True once for a run accepted here that has not finished since, when the bus still listens in
   * the generation it was accepted in: its record says `queued` or `running`, so the wait needs
   * no read (a reconnect re-reads every waiter's record, a deadline reads it too).
   */
  takeUnfinished(runId: string, generation: number | null): boolean {
    const at = this.expected.get(runId);
    if (at === undefined) return false;
    this.expected.delete(runId);
    return generation !== null && at === generation;
  }

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
    this.expected.delete(run.runId);
    const set = this.byRun.get(run.runId);
    if (set) for (const fn of [...set]) fn(run);
  }

  runIds(): string[] {
    return [...this.byRun.keys()];
  }
}
