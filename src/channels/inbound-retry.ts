import { setTimeout as sleep } from "node:timers/promises";
import { errorMessage, SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";
import type { InboundHandler, InboundMessage } from "./types.js";

/**
 * Second chances for inbound messages on platforms that do not redeliver (Discord gateway,
 * WhatsApp, Telegram long polling). A failing handler is retried after each configured delay and
 * then dropped with an error log — except while the gateway is UNAVAILABLE (storage or queue
 * down): then the message is retried until it is accepted or the channel stops, so nothing the
 * platform already handed over is lost while Redis is away.
 */

/** Longest wait between attempts while the gateway is unavailable. */
const UNAVAILABLE_MAX_DELAY_MS = 5000;

export function isUnavailable(err: unknown): boolean {
  return err instanceof SwitchboardError && err.code === "UNAVAILABLE";
}

/** Resolves once the message was accepted, given up on, or the signal aborted; never rejects. */
export async function deliverWithRetry(
  handler: InboundHandler,
  msg: InboundMessage,
  retryDelaysMs: readonly number[],
  log: Logger,
  signal?: AbortSignal,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await handler(msg);
      return;
    } catch (err) {
      const unavailable = isUnavailable(err);
      const delay = unavailable
        ? Math.min(
            UNAVAILABLE_MAX_DELAY_MS,
            retryDelaysMs[attempt] ?? retryDelaysMs.at(-1) ?? UNAVAILABLE_MAX_DELAY_MS,
          )
        : retryDelaysMs[attempt];
      if (delay === undefined || signal?.aborted) {
        log.error(
          { err: errorMessage(err), peerId: msg.peerId, messageId: msg.messageId },
          "inbound handler failed; message dropped",
        );
        return;
      }
      log.warn(
        { err: errorMessage(err), attempt: attempt + 1, unavailable },
        "inbound handler failed; retrying",
      );
      await sleep(delay, undefined, signal ? { signal } : undefined).catch(() => undefined);
      if (signal?.aborted) {
        log.error(
          { peerId: msg.peerId, messageId: msg.messageId },
          "stopped while retrying; message dropped",
        );
        return;
      }
    }
  }
}

/** Hands inbound messages to the handler one chat at a time, in arrival order, with `deliverWithRetry`. */
export class InboundQueue {
  private readonly tails = new Map<string, Promise<void>>();
  private abort = new AbortController();

  constructor(
    private readonly retryDelaysMs: readonly number[],
    private readonly log: Logger,
  ) {}

  /** Resolves once the message was accepted or given up on; never rejects. */
  push(chatKey: string, msg: InboundMessage, handler: InboundHandler): Promise<void> {
    const run = (this.tails.get(chatKey) ?? Promise.resolve()).then(() =>
      deliverWithRetry(handler, msg, this.retryDelaysMs, this.log, this.abort.signal),
    );
    this.tails.set(chatKey, run);
    void run.finally(() => {
      if (this.tails.get(chatKey) === run) this.tails.delete(chatKey);
    });
    return run;
  }

  /** Cuts retry waits short (the pending message is dropped with a log) and waits for the rest. */
  async drain(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled([...this.tails.values()]);
    this.abort = new AbortController();
  }
}
