import type { SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { AdapterContext, ChannelStatus, InboundHandler } from "../types.js";

/** What one adapter does at each point of the lifecycle; the order around them is the kit's. */
export interface LifecycleSteps {
  /** Connects to the platform; start() resolves when it does. Runs once the state is `starting`. */
  connect(): Promise<void>;
  /** The error a failed start rejects with (its message becomes the `error` detail). */
  startError(err: unknown): SwitchboardError;
  /** Tidies up after a failed connect, before the state turns `error`. */
  undoStart?(): Promise<void>;
  /** First half of stop(): cuts a pending start short and closes the platform connection. */
  disconnect(): Promise<void> | void;
  /** After the start settled: waits for what still hands inbound over (queues, a polling loop). */
  drain?(): Promise<void>;
}

/**
 * The start/stop/status lifecycle every channel adapter shares. `start` is idempotent (a second
 * call returns the first start's promise and keeps the first handler) and a failed start leaves
 * the adapter stopped in state `error`, ready to start again. `stop` is idempotent, cuts a pending
 * start short, then waits for the start to settle, the adapter's drain and every tracked
 * in-flight handover before the state turns `stopped`.
 */
export class ChannelLifecycle {
  #state: ChannelStatus = "stopped";
  #detail: string | undefined;
  #handler: InboundHandler | undefined;
  #context: AdapterContext = {};
  #starting: Promise<void> | undefined;
  #stopping = false;
  readonly #inflight = new Set<Promise<unknown>>();

  constructor(
    private readonly channel: string,
    private readonly log: Logger,
    private readonly steps: LifecycleSteps,
  ) {}

  get state(): ChannelStatus {
    return this.#state;
  }

  /** The inbound handler while started (also while a stop is in progress). */
  get handler(): InboundHandler | undefined {
    return this.#handler;
  }

  /** What the app handed over at start (media sink, press handler); empty before the first start. */
  get context(): AdapterContext {
    return this.#context;
  }

  /** True from the moment stop() is called until the next start(). */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** Started, connected and not stopping: a webhook may hand an event over now. */
  get accepting(): boolean {
    return this.#handler !== undefined && !this.#stopping && this.#state === "connected";
  }

  set(state: ChannelStatus, detail?: string): void {
    this.#state = state;
    this.#detail = detail;
  }

  status(): { state: ChannelStatus; detail?: string } {
    return this.#detail ? { state: this.#state, detail: this.#detail } : { state: this.#state };
  }

  async start(onInbound: InboundHandler, ctx: AdapterContext = {}): Promise<void> {
    if (this.#handler) {
      this.log.debug(`${this.channel} channel already started`);
      return this.#starting;
    }
    this.#handler = onInbound;
    this.#context = ctx;
    this.#stopping = false;
    this.set("starting");
    this.#starting = this.steps.connect().catch(async (err: unknown) => {
      const e = this.steps.startError(err);
      if (this.steps.undoStart) await this.steps.undoStart();
      this.#handler = undefined;
      this.set("error", e.message);
      throw e;
    });
    return this.#starting;
  }

  async stop(): Promise<void> {
    if (!this.#handler) return;
    this.#stopping = true;
    await this.steps.disconnect();
    await this.#starting?.catch(() => undefined);
    if (this.steps.drain) await this.steps.drain();
    await Promise.allSettled([...this.#inflight]);
    this.#handler = undefined;
    this.#starting = undefined;
    this.set("stopped");
  }

  /** Work stop() waits for (a webhook's or socket envelope's handover); returns `work` itself. */
  track<T>(work: Promise<T>): Promise<T> {
    this.#inflight.add(work);
    const done = () => {
      this.#inflight.delete(work);
    };
    work.then(done, done);
    return work;
  }
}
