import { setTimeout as sleep } from "node:timers/promises";
import type { InboundHandler, InboundMessage } from "../../src/channels/types.js";
import { errorMessage } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";

/**
 * Hands inbound messages to the handler one chat at a time, in arrival order, retrying a
 * failed handler after each configured delay. The gateway has no acknowledgement or
 * redelivery, so this in-process retry is the only second chance a message gets.
 */
export class InboundQueue {
  private readonly tails = new Map<string, Promise<void>>();
  private abort = new AbortController();

  constructor(
    private readonly retryDelaysMs: readonly number[],
    private readonly log: Logger,
  ) {}

  /** Resolves once the message was accepted or given up on; never rejects. */
  push(chatKey: string, msg: InboundMessage, handler: InboundHandler): Promise<void> {
    const run = (this.tails.get(chatKey) ?? Promise.resolve()).then(() => this.deliver(handler, msg));
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

  private async deliver(handler: InboundHandler, msg: InboundMessage): Promise<void> {
    const signal = this.abort.signal;
    for (let attempt = 0; ; attempt++) {
      try {
        await handler(msg);
        return;
      } catch (err) {
        const delay = this.retryDelaysMs[attempt];
        if (delay === undefined || signal.aborted) {
          this.log.error(
            { err: errorMessage(err), peerId: msg.peerId, messageId: msg.messageId },
            "inbound handler failed; message dropped",
          );
          return;
        }
        this.log.warn({ err: errorMessage(err), attempt: attempt + 1 }, "inbound handler failed; retrying");
        await sleep(delay, undefined, { signal }).catch(() => undefined);
        if (signal.aborted) {
          this.log.error(
            { peerId: msg.peerId, messageId: msg.messageId },
            "stopped while retrying; message dropped",
          );
          return;
        }
      }
    }
  }
}
