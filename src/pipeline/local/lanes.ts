import { canCollect, type TurnRequest } from "../types.js";

/**
 * Session lanes without I/O: one FIFO per session, at most one turn taken per lane at a time, and
 * a round-robin ring of lanes that could start a turn. A lane that finishes a turn and still has
 * messages goes to the BACK of the ring, so a session with 1,000 queued messages gets one turn per
 * round like everyone else.
 *
 * An entry joins its lane when `submitTurn` is called (so the lane order is the call order) but is
 * not taken before it is durable; an entry whose submission failed or was cancelled is `removed`.
 */

export interface LaneEntry {
  runId: string;
  req: TurnRequest;
  createdAt: number;
  /** Executions begun before (from the journal); the next attempt is `started + 1`. */
  started: number;
  durable: boolean;
  removed: boolean;
}

interface Lane {
  key: string;
  queue: LaneEntry[];
  head: number;
  pending: number;
  activeRunId: string | undefined;
  inRing: boolean;
}

export interface TakenTurn {
  sessionKey: string;
  entries: LaneEntry[];
}

export class LaneScheduler {
  private readonly lanes = new Map<string, Lane>();
  private ring: Lane[] = [];
  private ringHead = 0;

  constructor(private readonly mode: "collect" | "followup") {}

  add(entry: LaneEntry): void {
    let lane = this.lanes.get(entry.req.sessionKey);
    if (!lane) {
      lane = {
        key: entry.req.sessionKey,
        queue: [],
        head: 0,
        pending: 0,
        activeRunId: undefined,
        inRing: false,
      };
      this.lanes.set(lane.key, lane);
    }
    lane.queue.push(entry);
    lane.pending++;
    if (entry.durable) this.offer(lane);
  }

  /** The entry became durable: its lane may now be startable. */
  markDurable(entry: LaneEntry): void {
    entry.durable = true;
    const lane = this.lanes.get(entry.req.sessionKey);
    if (lane) this.offer(lane);
  }

  /** Takes the entry out of its lane (cancel, failed submission). false if it was not pending. */
  remove(entry: LaneEntry): boolean {
    if (entry.removed) return false;
    const lane = this.lanes.get(entry.req.sessionKey);
    if (!lane) return false;
    entry.removed = true;
    lane.pending--;
    this.skipRemoved(lane);
    if (lane.pending === 0 && lane.activeRunId === undefined) this.lanes.delete(lane.key);
    else this.offer(lane);
    return true;
  }

  /** The next turn to start, round-robin across sessions; null when no lane can start now. */
  take(): TakenTurn | null {
    while (this.ringHead < this.ring.length) {
      const lane = this.ring[this.ringHead++]!;
      lane.inRing = false;
      if (!this.startable(lane)) continue;
      const entries = this.takeEntries(lane);
      lane.activeRunId = entries[0]!.runId;
      this.compactRing();
      return { sessionKey: lane.key, entries };
    }
    this.ring = [];
    this.ringHead = 0;
    return null;
  }

  /** The lane's turn ended: requeue it at the back of the ring if messages wait. */
  release(sessionKey: string): void {
    const lane = this.lanes.get(sessionKey);
    if (!lane) return;
    lane.activeRunId = undefined;
    if (lane.pending === 0) this.lanes.delete(sessionKey);
    else this.offer(lane);
  }

  /** Messages waiting in every lane. */
  pendingTotal(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.pending;
    return n;
  }

  info(sessionKey: string): { pending: number; activeRunId?: string } {
    const lane = this.lanes.get(sessionKey);
    if (!lane) return { pending: 0 };
    return lane.activeRunId === undefined
      ? { pending: lane.pending }
      : { pending: lane.pending, activeRunId: lane.activeRunId };
  }

  // ---------------------------------------------------------------------------------------------

  private startable(lane: Lane): boolean {
    if (lane.activeRunId !== undefined) return false;
    this.skipRemoved(lane);
    const first = lane.queue[lane.head];
    return first?.durable === true;
  }

  private offer(lane: Lane): void {
    if (lane.inRing || !this.startable(lane)) return;
    lane.inRing = true;
    this.ring.push(lane);
  }

  /** The head entry plus, in collect mode, every following durable entry that may join it. */
  private takeEntries(lane: Lane): LaneEntry[] {
    const first = lane.queue[lane.head]!;
    const entries = [first];
    let i = lane.head + 1;
    if (this.mode === "collect") {
      for (; i < lane.queue.length; i++) {
        const e = lane.queue[i]!;
        if (e.removed) continue;
        if (!e.durable || !canCollect(first.req, e.req)) break;
        entries.push(e);
      }
    }
    for (const e of entries) e.removed = true;
    lane.pending -= entries.length;
    lane.head = i;
    this.skipRemoved(lane);
    return entries;
  }

  private skipRemoved(lane: Lane): void {
    while (lane.head < lane.queue.length && lane.queue[lane.head]!.removed) lane.head++;
    if (lane.head === lane.queue.length) {
      lane.queue = [];
      lane.head = 0;
    } else if (lane.head > 1024 && lane.head * 2 > lane.queue.length) {
      lane.queue = lane.queue.slice(lane.head);
      lane.head = 0;
    }
  }

  private compactRing(): void {
    if (this.ringHead > 1024 && this.ringHead * 2 > this.ring.length) {
      this.ring = this.ring.slice(this.ringHead);
      this.ringHead = 0;
    }
  }
}
