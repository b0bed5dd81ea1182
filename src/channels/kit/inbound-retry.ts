import { errorMessage, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { retryLoop } from "../../retry/index.js";
import type { InboundHandler, InboundMessage } from "../types.js";

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
  return (
    err instanceof SwitchboardError && (err.code === "UNAVAILABLE" || err.code === "STORAGE_UNAVAILABLE")
  );
}

/** The wait before retry `attempt + 1`, or undefined to give up: the list, unending while UNAVAILABLE. */
export function inboundDelayMs(
  err: unknown,
  attempt: number,
  retryDelaysMs: readonly number[],
): number | undefined {
  if (!isUnavailable(err)) return retryDelaysMs[attempt];
  return Math.min(
    UNAVAILABLE_MAX_DELAY_MS,
    retryDelaysMs[attempt] ?? retryDelaysMs.at(-1) ?? UNAVAILABLE_MAX_DELAY_MS,
  );
}

/** Resolves once the message was accepted, given up on, or the signal aborted; never rejects. */
export async function deliverWithRetry(
  handler: InboundHandler,
  msg: InboundMessage,
  retryDelaysMs: readonly number[],
  log: Logger,
  signal?: AbortSignal,
): Promise<void> {
  try {
    await retryLoop(() => handler(msg), {
      delayFor: (err, attempt) => inboundDelayMs(err, attempt, retryDelaysMs),
      signal,
      onRetry: ({ retry, err }) =>
        log.warn(
          { err: errorMessage(err), attempt: retry, unavailable: isUnavailable(err) },
          "inbound handler failed; retrying",
        ),
    });
  } catch (err) {
    if (signal?.aborted && err === signal.reason) {
      log.error({ peerId: msg.peerId, messageId: msg.messageId }, "stopped while retrying; message dropped");
      return;
    }
    log.error(
      { err: errorMessage(err), peerId: msg.peerId, messageId: msg.messageId },
      "inbound handler failed; message dropped",
    );
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

  /**
   * Resolves once the message was accepted or given up on; never rejects. `msg` may be a function
   * that finishes the message first (its attachments taken by the media sink), run in the chat's
   * turn so order holds; if it fails the message is dropped with an error log.
   */
  push(
    chatKey: string,
    msg: InboundMessage | (() => Promise<InboundMessage>),
    handler: InboundHandler,
  ): Promise<void> {
    const run = (this.tails.get(chatKey) ?? Promise.resolve()).then(async () => {
      let ready: InboundMessage;
      try {
        ready = typeof msg === "function" ? await msg() : msg;
      } catch (err) {
        this.log.error({ err: errorMessage(err), chatKey }, "inbound message could not be prepared; dropped");
        return;
      }
      await deliverWithRetry(handler, ready, this.retryDelaysMs, this.log, this.abort.signal);
    });
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
