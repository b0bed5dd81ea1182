import type { ChannelAdapter } from "../channels/types.js";
import { errorMessage, RateLimitedError } from "../errors.js";
import type { Logger } from "../log.js";
import { chatTypeOfKey, evaluateSendPolicy } from "../policy/send-policy.js";
import { retryLoop } from "../retry/index.js";
import type { ChannelRegistry, Delivery, DeliveryOutcome, DeliveryRequest, Services } from "../services.js";
import type { DeliveryContext, SessionEntry } from "../store/types.js";
import { chunkText } from "./chunk.js";
import { renderMarkdown } from "./format/index.js";

/**
 * Outbound delivery: route (explicit, then deliveryContext, then lastChannel/lastTo), send
 * policy, per-channel rendering and chunking, and an outbox so a retried job never posts the
 * same chunk twice.
 */

const MAX_RATE_LIMIT_RETRIES = 3;
const MAX_RETRY_WAIT_MS = 30_000;
const OUTBOX_TTL_MS = 7 * 24 * 3600_000;

export function routeOf(entry: SessionEntry): DeliveryContext | null {
  if (entry.deliveryContext) return entry.deliveryContext;
  if (entry.lastChannel && entry.lastTo) {
    return {
      channel: entry.lastChannel,
      to: entry.lastTo,
      ...(entry.lastAccountId ? { accountId: entry.lastAccountId } : {}),
      ...(entry.lastThreadId ? { threadId: entry.lastThreadId } : {}),
    };
  }
  return null;
}

export class ChannelDelivery implements Delivery {
  constructor(
    private readonly services: Pick<Services, "store" | "config"> & {
      channels: ChannelRegistry;
      logger: Logger;
    },
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  async deliver(req: DeliveryRequest): Promise<DeliveryOutcome> {
    const { store, config, logger } = this.services;
    const entry = await store.sessions.get(req.sessionKey);
    if (!entry) return { status: "no-route", reason: `session ${req.sessionKey} does not exist` };
    const route = req.route ?? routeOf(entry);
    if (!route)
      return {
        status: "no-route",
        reason: `session ${req.sessionKey} has no delivery context (no chat to post into)`,
      };
    if (!req.bypassPolicy) {
      const verdict = evaluateSendPolicy({
        ...(entry.sendPolicy ? { override: entry.sendPolicy } : {}),
        rules: config.session.sendPolicy.rules,
        default: config.session.sendPolicy.default,
        target: {
          key: entry.key,
          channel: route.channel,
          chatType: entry.chatType ?? chatTypeOfKey(entry.key),
        },
      });
      if (verdict.action === "deny")
        return { status: "blocked", reason: `send blocked by session policy: ${verdict.reason}` };
    }
    const adapter = this.services.channels.get(route.channel, route.accountId);
    if (!adapter)
      return {
        status: "no-route",
        reason: `channel ${route.channel} (account ${route.accountId ?? "default"}) is not running`,
      };
    const text = req.text.trim();
    if (!text) return { status: "no-route", reason: "empty text" };
    const rendered = renderMarkdown(text, adapter.capabilities.markdown);
    const chunks = chunkText(rendered, adapter.capabilities.textLimit);
    const ids: string[] = [];
    let duplicates = 0;
    for (const [i, chunk] of chunks.entries()) {
      const id = `${req.idempotencyKey}#${i}`;
      if (!(await store.outbox.claim(id, OUTBOX_TTL_MS))) {
        duplicates++;
        continue;
      }
      try {
        const res = await this.#sendWithRetry(adapter, {
          accountId: route.accountId ?? adapter.accountId,
          to: route.to,
          ...(route.threadId ? { threadId: route.threadId } : {}),
          text: chunk,
          format: adapter.capabilities.markdown === "plain" ? "plain" : "native",
        });
        await store.outbox.complete(id, res);
        ids.push(...res.messageIds);
      } catch (err) {
        await store.outbox.release(id);
        logger.warn({ err, sessionKey: entry.key, channel: route.channel }, "delivery failed");
        return { status: "failed", error: `${route.channel}: ${errorMessage(err)}` };
      }
    }
    if (duplicates === chunks.length) return { status: "duplicate" };
    return { status: "sent", channel: route.channel, messageIds: ids };
  }

  async #sendWithRetry(
    adapter: ChannelAdapter,
    msg: Parameters<ChannelAdapter["send"]>[0],
  ): Promise<{ messageIds: string[] }> {
    return retryLoop(() => adapter.send(msg), {
      delayFor: (err, attempt) =>
        err instanceof RateLimitedError && attempt < MAX_RATE_LIMIT_RETRIES
          ? Math.min(MAX_RETRY_WAIT_MS, Math.max(0, err.retryAfterMs))
          : undefined,
      sleep: (ms) => this.sleep(ms),
    });
  }
}

/** Channel adapters by channel and account (the first account when none is named). */
export class AdapterRegistry implements ChannelRegistry {
  readonly #adapters: ChannelAdapter[] = [];

  add(adapter: ChannelAdapter): void {
    this.#adapters.push(adapter);
  }

  get(channel: string, accountId?: string): ChannelAdapter | undefined {
    const same = this.#adapters.filter((a) => a.channel === channel);
    return (
      (accountId ? same.find((a) => a.accountId === accountId) : undefined) ??
      (accountId ? undefined : same[0])
    );
  }

  all(): ChannelAdapter[] {
    return [...this.#adapters];
  }
}
