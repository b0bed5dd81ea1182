import { renderMarkdown } from "../channels/kit/format/index.js";
import type { ChannelAdapter } from "../channels/types.js";
import { errorMessage, RateLimitedError } from "../errors.js";
import type { Logger } from "../log.js";
import type { DeliveryOutcome, ReplyStream } from "../services/index.js";
import type { DeliveryContext, OutboxStore } from "../store/types.js";

/**
 * Streaming edits: one preview message per reply, posted when text first arrives and edited as
 * more streams in, never faster than the channel's edit interval (its rate limits), coalescing
 * whatever arrived meanwhile. The preview is posted under the reply's first outbox key
 * (`<key>#0`), so a re-run of the same turn adopts and edits the message it already posted
 * instead of posting another; `finish` turns it into exactly the final text.
 */

const OUTBOX_TTL_MS = 7 * 24 * 3600_000;
/** A preview longer than the message limit shows its start and this marker; finish splits properly. */
const MORE = " …";

export interface StreamDeps {
  outbox: OutboxStore;
  /** The outbox lease held while posting the preview (delivery's). */
  leaseMs: number;
  logger: Logger;
  adapter: ChannelAdapter;
  route: DeliveryContext;
  /** Least time between two writes of the preview. */
  intervalMs: number;
  /** Posts the final text; chunk 0 replaces `firstMessageId` when given (delivery's chunk loop). */
  finalize(text: string, firstMessageId: string | undefined, shown: string): Promise<DeliveryOutcome>;
  now?: () => number;
}

export class StreamingReply implements ReplyStream {
  #text = "";
  /** The rendered text the preview shows now. */
  #shown = "";
  #messageId: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #inflight: Promise<void> | undefined;
  /** Earliest time of the next write (interval, or a platform's retry-after). */
  #nextAt = 0;
  #closed = false;
  /** Set when previews cannot work for this reply (claimed elsewhere, edit refused); finish still posts. */
  #disabled = false;
  readonly #now: () => number;

  constructor(
    private readonly deps: StreamDeps,
    private readonly key: string,
  ) {
    this.#now = deps.now ?? Date.now;
  }

  /** The platform message id of the preview, once posted. */
  get messageId(): string | undefined {
    return this.#messageId;
  }

  push(delta: string): void {
    if (this.#closed || !delta) return;
    if (this.#text === "" && this.#messageId === undefined && this.#nextAt === 0) {
      // The first preview waits one interval, so a quick reply is posted once, not posted and edited.
      this.#nextAt = this.#now() + this.deps.intervalMs;
    }
    this.#text += delta;
    this.#schedule();
  }

  reset(): void {
    this.#text = "";
  }

  #schedule(): void {
    if (this.#closed || this.#disabled || this.#timer || this.#inflight) return;
    const delay = Math.max(0, this.#nextAt - this.#now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#inflight = this.#flush().finally(() => {
        this.#inflight = undefined;
        if (this.#preview() !== this.#shown) this.#schedule();
      });
    }, delay);
    this.#timer.unref?.();
  }

  #preview(): string {
    const text = this.#text.trim();
    if (!text) return "";
    const rendered = renderMarkdown(text, this.deps.adapter.capabilities.markdown);
    const limit = this.deps.adapter.capabilities.textLimit;
    return rendered.length > limit ? `${rendered.slice(0, limit - MORE.length)}${MORE}` : rendered;
  }

  #message(text: string) {
    const { route, adapter } = this.deps;
    return {
      accountId: route.accountId ?? adapter.accountId,
      to: route.to,
      ...(route.threadId ? { threadId: route.threadId } : {}),
      text,
      format: adapter.capabilities.markdown === "plain" ? ("plain" as const) : ("native" as const),
    };
  }

  /** One write; the next may start an interval after this one completed (so the platform sees the gap). */
  async #flush(): Promise<void> {
    try {
      await this.#write();
    } finally {
      this.#nextAt = Math.max(this.#nextAt, this.#now() + this.deps.intervalMs);
    }
  }

  async #write(): Promise<void> {
    if (this.#closed || this.#disabled) return;
    const text = this.#preview();
    if (!text || text === this.#shown) return;
    const { adapter, outbox, logger } = this.deps;
    try {
      if (this.#messageId === undefined) {
        const id = `${this.key}#0`;
        const lease = await outbox.lease(id, this.deps.leaseMs, OUTBOX_TTL_MS);
        if (!lease.acquired) {
          const adopted = lease.state === "done" ? lease.messageIds?.[0] : undefined;
          if (!adopted) {
            // Another attempt is posting this reply right now: leave the chat to it.
            this.#disabled = true;
            return;
          }
          this.#messageId = adopted;
        } else {
          try {
            const res = await adapter.send(this.#message(text));
            await outbox.complete(id, res, OUTBOX_TTL_MS);
            this.#messageId = res.messageIds[0];
            this.#shown = text;
            if (this.#messageId === undefined) this.#disabled = true;
            return;
          } catch (err) {
            await outbox.release(id);
            throw err;
          }
        }
      }
      if (!adapter.edit) {
        this.#disabled = true;
        return;
      }
      await adapter.edit({ ...this.#message(text), messageId: this.#messageId });
      this.#shown = text;
    } catch (err) {
      if (err instanceof RateLimitedError) {
        this.#nextAt = this.#now() + Math.max(this.deps.intervalMs, err.retryAfterMs);
        return;
      }
      logger.warn(
        { err: errorMessage(err), channel: adapter.channel },
        "streaming preview failed; the final reply is posted whole",
      );
      this.#disabled = true;
    }
  }

  async #settle(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#inflight;
  }

  async finish(text: string): Promise<DeliveryOutcome> {
    await this.#settle();
    // The final edit keeps the same spacing as the previews (at most one interval of waiting).
    const wait = this.#nextAt - this.#now();
    if (this.#messageId !== undefined && wait > 0) await new Promise((r) => setTimeout(r, wait));
    return this.deps.finalize(text, this.#messageId, this.#shown);
  }

  async close(): Promise<void> {
    await this.#settle();
  }
}
