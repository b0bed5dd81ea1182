import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { z } from "zod";
import { errorMessage } from "../errors.js";
import type { EventBus, GatewayEventName } from "../events.js";
import type { Logger } from "../log.js";
import { closeClient } from "../redis/close.js";

/**
 * On the bullmq pipeline a turn runs in whichever process took its job, so its streamed text,
 * typing and transcript events happen on that process's bus. This relay carries them over Redis
 * pub/sub to every gateway, which re-emits them on its own bus (and so on `/ws`). Run lifecycle
 * events travel with the pipeline (`run.started`/`run.finished`); these are the live rest.
 *
 * Best effort, like the events themselves: a message lost while Redis is away is not replayed
 * (clients read transcripts and runs for the truth). Events are batched per tick, so a turn costs
 * one or two PUBLISH commands, not one per event; a process never re-publishes what it received.
 */

export const RELAYED_EVENTS = ["run.delta", "run.typing", "message.appended", "session.updated"] as const;
type Relayed = (typeof RELAYED_EVENTS)[number];
const relayed: ReadonlySet<string> = new Set(RELAYED_EVENTS);

const relayMessageSchema = z.object({
  from: z.string().min(1),
  events: z
    .array(z.object({ event: z.enum(RELAYED_EVENTS), data: z.record(z.string(), z.unknown()) }))
    .min(1)
    .max(10_000),
});

export interface LiveRelayOptions {
  /** Command connection (shared, owned by the composition root). */
  publisher: Redis;
  /** A new connection for SUBSCRIBE (closed here). */
  createSubscriber: () => Redis;
  /** The pub/sub channel, inside the queue's hash tag. */
  channel: string;
  logger: Logger;
}

export class LiveRelay {
  readonly #from = randomUUID();
  /** How this process's own messages begin (#flush writes `from` first): dropped unparsed. */
  readonly #ownPrefix = `{"from":${JSON.stringify(this.#from)},`;
  #pending: Array<{ event: Relayed; data: unknown }> = [];
  #flushing = false;
  #replaying = false;
  #unsubscribe: (() => void) | null = null;
  #sub: Redis | null = null;

  constructor(private readonly opts: LiveRelayOptions) {}

  /** Forwards this process's live events; with `receive`, re-emits other processes' on `bus`. */
  async start(bus: EventBus, receive: boolean): Promise<void> {
    if (this.#unsubscribe) return;
    this.#unsubscribe = bus.onAny((event, data) => {
      if (this.#replaying || !relayed.has(event)) return;
      this.#pending.push({ event: event as Relayed, data });
      if (!this.#flushing) {
        this.#flushing = true;
        setImmediate(() => this.#flush());
      }
    });
    if (!receive) return;
    const sub = this.opts.createSubscriber();
    this.#sub = sub;
    sub.on("error", (err: unknown) =>
      this.opts.logger.warn({ err: errorMessage(err) }, "live event relay: connection error"),
    );
    sub.on("message", (channel: string, raw: string) => {
      if (channel === this.opts.channel) this.#receive(bus, raw);
    });
    await sub.subscribe(this.opts.channel);
  }

  async stop(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    this.#pending = [];
    const sub = this.#sub;
    this.#sub = null;
    if (sub) await closeClient(sub);
  }

  #flush(): void {
    this.#flushing = false;
    const events = this.#pending;
    this.#pending = [];
    if (events.length === 0 || !this.#unsubscribe) return;
    this.opts.publisher
      .publish(this.opts.channel, JSON.stringify({ from: this.#from, events }))
      .catch((err: unknown) =>
        this.opts.logger.debug({ err: errorMessage(err), events: events.length }, "live events not relayed"),
      );
  }

  #receive(bus: EventBus, raw: string): void {
    if (raw.startsWith(this.#ownPrefix)) return; // this process emitted them already
    let msg: z.infer<typeof relayMessageSchema>;
    try {
      const parsed = relayMessageSchema.safeParse(JSON.parse(raw));
      if (!parsed.success) throw new Error(parsed.error.issues[0]?.message ?? "invalid");
      msg = parsed.data;
    } catch (err) {
      this.opts.logger.warn({ err: errorMessage(err) }, "live event relay: unreadable message ignored");
      return;
    }
    if (msg.from === this.#from) return; // the same, written some other way
    this.#replaying = true;
    try {
      for (const { event, data } of msg.events) bus.emit(event as GatewayEventName, data as never);
    } finally {
      this.#replaying = false;
    }
  }
}
