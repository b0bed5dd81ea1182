import { randomUUID } from "node:crypto";
import { errorMessage } from "../../errors.js";
import { extendLock } from "../../redis/commands/pipeline.js";
import type { DriverContext } from "./context.js";
import type { DrainHold, TurnProcessor } from "./turns.js";

/**
 * Direct turns: a process that runs jobs and accepts a turn takes the session's next turn itself,
 * at once, when one of its slots is free — its takeTurn goes out right behind the submit, in the
 * same round trip — instead of leaving it to a drain job for some worker to fetch. The take finds
 * nothing when a turn of the session is in flight (that turn's drain then sees the message); when
 * it took nothing and the submit says nobody drains the session, the caller adds a drain job. The
 * turn is the same turn: taken from the mailbox by `takeTurn-4`, fenced and committed by the same
 * scripts (turns.ts). Only its lock is its own: takeTurn sets `keys.lock(<direct id>)` (the key
 * BullMQ would use for a job of that id) for `lockDurationMs`, this class renews it every half of
 * that while the turn runs, and `ackTurn-5` deletes it. So nothing changes for anyone else:
 * - while the turn runs, a drain job of the session finds it "busy", as with a job's lock;
 * - if this process dies, the lock expires and the sweeper's drain job resumes the turn with
 *   attempt + 1 (after about lockDurationMs + sweepIntervalMs);
 * - a process whose event loop stalled past its lock finds the lock gone: the fences refuse its
 *   writes, and an expired lock is never extended again (`extendLock-1`).
 * After the turn, messages left in the mailbox go to a drain job (BullMQ, round-robin with other
 * sessions); on stop, or when the turn fails on Redis or the RunStore, the lock is dropped and a
 * drain job takes the turn over.
 *
 * What it saves: a BullMQ job's add, fetch, lock and completion (measured in bench/gateway.ts: the
 * larger part of a bullmq turn's CPU), and the race of every consumer for each job.
 */

/** `concurrency` slots shared by this process's BullMQ jobs and its direct turns. */
export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  /** A slot now, or false (a direct turn then goes to the queue instead). */
  tryTake(): boolean {
    if (this.used >= this.size) return false;
    this.used++;
    return true;
  }

  /** A slot when one is free (BullMQ jobs, which are already this process's). */
  take(): Promise<void> {
    if (this.tryTake()) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}

export class DirectTurns {
  /** The value of every direct lock of this process. */
  private readonly token = randomUUID();
  private seq = 0;
  /** Direct ids whose turn was taken and whose lock this process keeps alive. */
  private readonly held = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ctx: DriverContext,
    private readonly turns: TurnProcessor,
    private readonly slots: Slots,
    /** Adds the session's drain job (worker.ts `addDrain`). */
    private readonly addDrain: (sessionKey: string) => Promise<void>,
    /** Tracks the run so the worker host's stop waits for it (and aborts it after its grace). */
    private readonly track: (run: Promise<void>) => void,
  ) {}

  /**
   * Takes the session's next turn here when a slot is free. Its takeTurn is written at once, so
   * called right after the submit it rides the same round trip. Resolves true once a turn is taken
   * (it then runs here), false when the take found none (the session's turn is in flight elsewhere,
   * or the mailbox is empty) or failed. null: no free slot, nothing was tried.
   */
  tryRun(sessionKey: string): Promise<boolean> | null {
    if (this.ctx.stopping() || !this.slots.tryTake()) return null;
    const id = `direct-${this.ctx.instanceId}-${++this.seq}`;
    let took!: (yes: boolean) => void;
    const taken = new Promise<boolean>((resolve) => {
      took = resolve;
    });
    const run = this.run(sessionKey, id, () => took(true)).finally(() => {
      took(false);
      this.held.delete(id);
      this.slots.give();
    });
    this.track(run);
    return taken;
  }

  /** No more renewals (after stop waited for the turns: the locks of any left expire). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.held.clear();
  }

  private async run(sessionKey: string, id: string, took: () => void): Promise<void> {
    const hold: DrainHold = {
      id,
      token: this.token,
      lockMs: this.ctx.tuning.lockDurationMs,
      taken: () => {
        this.keep(id);
        took();
      },
      next: () => this.addDrain(sessionKey),
      handBack: () => this.handOver(sessionKey, id),
    };
    try {
      await this.turns.drain(sessionKey, hold);
    } catch (err) {
      this.ctx.logger.warn(
        { err: errorMessage(err), sessionKey },
        "bullmq pipeline: a direct turn failed; a drain job takes the session over",
      );
      await this.handOver(sessionKey, id).catch((e: unknown) =>
        this.ctx.logger.warn(
          { err: errorMessage(e), sessionKey },
          "bullmq pipeline: handing a direct turn over failed; the sweeper re-drives it once its lock expires",
        ),
      );
    }
  }

  /** Drops the lock (a drain job would find the turn "busy" until it expired), then adds the drain job. */
  private async handOver(sessionKey: string, id: string): Promise<void> {
    this.held.delete(id);
    await this.ctx.redis.del(this.ctx.keys.lock(id));
    await this.addDrain(sessionKey);
  }

  private keep(id: string): void {
    this.held.add(id);
    if (this.timer) return;
    const every = Math.max(100, Math.floor(this.ctx.tuning.lockDurationMs / 2));
    this.timer = setInterval(() => void this.renew(), every);
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    const { ctx } = this;
    if (this.held.size === 0) {
      this.stop();
      return;
    }
    await Promise.all(
      [...this.held].map(async (id) => {
        try {
          const ok = await ctx.scripts.run(
            extendLock,
            [ctx.keys.lock(id)],
            [this.token, ctx.tuning.lockDurationMs],
          );
          if (Number(ok) === 1 || !this.held.has(id)) return;
          this.held.delete(id);
          ctx.logger.warn({ jobId: id }, "bullmq pipeline: direct turn's lock lost; aborting it here");
          this.turns.lockLost(id);
        } catch (err) {
          ctx.logger.warn(
            { err: errorMessage(err), jobId: id },
            "bullmq pipeline: renewing a direct lock failed",
          );
        }
      }),
    );
  }
}
