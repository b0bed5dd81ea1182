import { chunkText } from "../channels/kit/chunk.js";
import { type MarkdownDialect, renderMarkdown } from "../channels/kit/format/index.js";
import type { ChannelAdapter, OutboundAction, OutboundAttachment } from "../channels/types.js";
import { channelSettings } from "../config/channels.js";
import type { Config } from "../config/schema.js";
import { errorMessage, RateLimitedError } from "../errors.js";
import { defaultName } from "../media/names.js";
import type { MediaStore } from "../media/types.js";
import { sendDecision } from "../policy/access.js";
import { chatTypeOfKey } from "../policy/send-policy.js";
import { retryLoop } from "../retry/index.js";
import type {
  ChannelRegistry,
  Delivery,
  DeliveryEdit,
  DeliveryOutcome,
  DeliveryRequest,
  ReplyStream,
  Services,
} from "../services/index.js";
import { routeOf } from "../sessions/route.js";
import type { DeliveryContext, SessionEntry } from "../store/types.js";
import { countDelivery, traced } from "../telemetry/index.js";
import { StreamingReply } from "./stream.js";

/**
 * Outbound delivery: route (explicit, then deliveryContext, then lastChannel/lastTo), send
 * policy, per-channel rendering and chunking, and an outbox so a retried job never posts the
 * same chunk twice.
 */

const MAX_RATE_LIMIT_RETRIES = 3;
const MAX_RETRY_WAIT_MS = 30_000;
/** How long a sent chunk's mark is kept (a retried job within this time never re-posts it). */
const OUTBOX_TTL_MS = 7 * 24 * 3600_000;
/**
 * The sending lease of one chunk: long enough for a send with its rate-limit retries, short
 * enough that a crash between lease and mark delays the re-send by at most this much.
 */
export const DEFAULT_LEASE_MS = 15_000;
/** Waits for another sender's live lease before giving up on a chunk (bounded). */
const MAX_LEASE_WAITS = 3;

/**
 * Chunks the Markdown, then renders each chunk on its own, so a tag or an entity never spans two
 * messages (the platform would refuse the half). A chunk whose rendering outgrows the limit
 * (escapes, tags) is cut smaller, a bounded number of times, so adapters need not re-chunk.
 */
export function renderChunks(text: string, dialect: MarkdownDialect, limit: number): string[] {
  const fitChunk = (md: string, depth: number): string[] => {
    const out = renderMarkdown(md, dialect);
    if (out.length <= limit || depth >= 4) return out.trim() ? [out] : [];
    const smaller = Math.max(1, Math.floor(((md.length * limit) / out.length) * 0.9));
    return chunkText(md, smaller).flatMap((c) => fitChunk(c, depth + 1));
  };
  return chunkText(text, limit).flatMap((c) => fitChunk(c, 0));
}

interface Target {
  entry: SessionEntry;
  route: DeliveryContext;
  adapter: ChannelAdapter;
}

/** A channel's `streaming` setting (API.md §7); the web chat and unknown channels stream. */
export function streamingMode(config: Config, channel: string): "partial" | "off" | "final" {
  return channelSettings(config, channel)?.streaming ?? "partial";
}

/** Routes from the store, the adapters, the send policy and rendering from the config. */
export type ChannelDeliveryDeps = Pick<Services, "store" | "config" | "channels" | "logger"> &
  Partial<Pick<Services, "media">>;

/** How `#post` sends one text: a reply or a failure line, an edited preview, buttons under the last chunk. */
interface PostOptions {
  kind: "reply" | "failure";
  editFirst?: boolean;
  firstMessageId?: string;
  shown?: string;
  actions?: OutboundAction[];
}

export class ChannelDelivery implements Delivery {
  constructor(
    private readonly services: ChannelDeliveryDeps,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
    private readonly leaseMs: number = DEFAULT_LEASE_MS,
    /** Overrides every channel's edit interval (tests). */
    private readonly editIntervalMs?: number,
  ) {}

  deliver(req: DeliveryRequest, session?: SessionEntry): Promise<DeliveryOutcome> {
    return traced(
      "switchboard.delivery",
      req.sessionKey,
      async () => {
        const target = await this.#target(req, session);
        if ("status" in target) {
          // a channel this process does not run is counted where it is posted (a worker's hand-off)
          if (!("missingChannel" in target && target.missingChannel))
            countDelivery(req.route?.channel ?? "none", target.status);
          return target;
        }
        if (req.attachments?.length) return this.#postFiles(target, req);
        const withActions = req.actions && req.actions.length > 0;
        const buttons = withActions && target.adapter.capabilities.buttons === true;
        const text =
          withActions && !buttons && req.actionsFallback ? `${req.text}\n\n${req.actionsFallback}` : req.text;
        return this.#post(target, text, req.idempotencyKey, {
          kind: req.kind ?? "reply",
          ...(buttons && req.actions ? { actions: req.actions } : {}),
        });
      },
      { parent: req.traceparent },
    );
  }

  async edit(req: DeliveryEdit): Promise<boolean> {
    const adapter = this.services.channels.get(req.route.channel, req.route.accountId);
    if (!adapter?.edit) return false;
    const [text] = renderChunks(req.text, adapter.capabilities.markdown, adapter.capabilities.textLimit);
    if (!text) return false;
    await this.#withRetry(
      () =>
        adapter.edit?.({
          accountId: req.route.accountId ?? adapter.accountId,
          to: req.route.to,
          ...(req.route.threadId ? { threadId: req.route.threadId } : {}),
          format: adapter.capabilities.markdown === "plain" ? "plain" : "native",
          text,
          messageId: req.messageId,
          ...(req.actions && adapter.capabilities.buttons ? { actions: req.actions } : {}),
        }) ?? Promise.resolve(),
    );
    return true;
  }

  async openStream(
    req: Pick<DeliveryRequest, "sessionKey" | "idempotencyKey" | "traceparent">,
    session?: SessionEntry,
  ): Promise<ReplyStream | null> {
    const target = await this.#target(req, session);
    if ("status" in target) return null;
    const { adapter, route, entry } = target;
    const caps = adapter.capabilities.streaming;
    if (!adapter.edit || !caps || streamingMode(this.services.config, route.channel) !== "partial")
      return null;
    const group = (entry.chatType ?? chatTypeOfKey(entry.key)) !== "direct";
    const intervalMs = this.editIntervalMs ?? (group ? caps.groupEditIntervalMs : caps.editIntervalMs);
    return new StreamingReply(
      {
        outbox: this.services.store.outbox,
        leaseMs: this.leaseMs,
        logger: this.services.logger,
        adapter,
        route,
        intervalMs,
        finalize: (text, firstMessageId, shown) =>
          traced(
            "switchboard.delivery",
            entry.key,
            () =>
              this.#post(target, text, req.idempotencyKey, {
                kind: "reply",
                editFirst: true,
                ...(firstMessageId ? { firstMessageId } : {}),
                shown,
              }),
            { parent: req.traceparent },
          ),
      },
      req.idempotencyKey,
    );
  }

  /** Route, send policy and adapter of a request (its session row read, unless given), or why there is none. */
  async #target(
    req: Pick<DeliveryRequest, "sessionKey" | "route" | "bypassPolicy">,
    session?: SessionEntry,
  ): Promise<Target | Exclude<DeliveryOutcome, { status: "sent" } | { status: "duplicate" }>> {
    const { store, config } = this.services;
    const entry = session?.key === req.sessionKey ? session : await store.sessions.get(req.sessionKey);
    if (!entry) return { status: "no-route", reason: `session ${req.sessionKey} does not exist` };
    const route = req.route ?? routeOf(entry);
    if (!route)
      return {
        status: "no-route",
        reason: `session ${req.sessionKey} has no delivery context (no chat to post into)`,
      };
    if (!req.bypassPolicy) {
      const verdict = sendDecision({ config }, entry, route);
      if (verdict.action === "deny")
        return { status: "blocked", reason: `send blocked by session policy: ${verdict.reason}` };
    }
    const adapter = this.services.channels.get(route.channel, route.accountId);
    if (!adapter)
      return {
        status: "no-route",
        reason: `channel ${route.channel} (account ${route.accountId ?? "default"}) is not running`,
        missingChannel: route.channel,
      };
    return { entry, route, adapter };
  }

  /**
   * Renders, chunks and posts `text`, one outbox key per chunk. With `editFirst` (a streamed
   * reply), chunk 0 replaces the preview — `firstMessageId`, or the message an earlier attempt
   * posted under the same key — instead of being posted.
   */
  async #post(target: Target, rawText: string, key: string, opts: PostOptions): Promise<DeliveryOutcome> {
    const out = await this.#postChunks(target, rawText, key, opts);
    countDelivery(target.route.channel, out.status);
    return out;
  }

  async #postChunks(
    target: Target,
    rawText: string,
    key: string,
    opts: PostOptions,
  ): Promise<DeliveryOutcome> {
    const { store, logger } = this.services;
    const { adapter, route, entry } = target;
    const text = rawText.trim();
    if (!text) return { status: "no-route", reason: "empty text" };
    const chunks = renderChunks(text, adapter.capabilities.markdown, adapter.capabilities.textLimit);
    const ids: string[] = [];
    let duplicates = 0;
    const base = {
      accountId: route.accountId ?? adapter.accountId,
      to: route.to,
      ...(route.threadId ? { threadId: route.threadId } : {}),
      format: adapter.capabilities.markdown === "plain" ? ("plain" as const) : ("native" as const),
      ...(opts.kind === "failure" ? { kind: "failure" as const } : {}),
    };
    for (const [i, chunk] of chunks.entries()) {
      const id = `${key}#${i}`;
      let editId = i === 0 && opts.editFirst ? opts.firstMessageId : undefined;
      if (editId === undefined) {
        // At-least-once: a short lease while sending, the long mark only once the platform said yes.
        const lease = await this.#lease(id);
        if (lease === "done") {
          // A streamed reply's first chunk replaces the preview an earlier attempt posted.
          const prior = i === 0 && opts.editFirst && adapter.edit ? await store.outbox.get(id) : null;
          editId = prior?.state === "done" ? prior.messageIds?.[0] : undefined;
          if (editId === undefined) {
            duplicates++;
            continue;
          }
        } else if (lease === "busy") {
          return { status: "failed", error: `${route.channel}: chunk ${id} is being sent by another worker` };
        } else if (lease === "expired") {
          logger.warn(
            { idempotencyKey: id, sessionKey: entry.key, channel: route.channel },
            "delivery: an earlier send of this chunk was interrupted before its mark; sending again (the chat may show it twice)",
          );
        }
      }
      try {
        if (editId !== undefined && adapter.edit) {
          const messageId = editId;
          if (chunk !== opts.shown || opts.firstMessageId === undefined)
            await this.#withRetry(
              () => adapter.edit?.({ ...base, text: chunk, messageId }) ?? Promise.resolve(),
            );
          ids.push(messageId);
          continue;
        }
        const last = i === chunks.length - 1;
        const res = await this.#withRetry(() =>
          adapter.send({ ...base, text: chunk, ...(last && opts.actions ? { actions: opts.actions } : {}) }),
        );
        await store.outbox.complete(id, res, OUTBOX_TTL_MS);
        ids.push(...res.messageIds);
      } catch (err) {
        if (editId === undefined) await store.outbox.release(id);
        logger.warn({ err, sessionKey: entry.key, channel: route.channel }, "delivery failed");
        return { status: "failed", error: `${route.channel}: ${errorMessage(err)}` };
      }
    }
    if (duplicates === chunks.length) return { status: "duplicate" };
    return { status: "sent", channel: route.channel, messageIds: ids };
  }

  /**
   * Files with their caption (API.md §8.2): the text rides as the caption when it fits the
   * platform's caption limit, else it is posted first as text and the files follow uncaptioned.
   * The files go in one send under one outbox key (`<key>#files`), resolved from the media store
   * only now. A channel without media posts the text and a line naming each file.
   */
  async #postFiles(target: Target, req: DeliveryRequest): Promise<DeliveryOutcome> {
    const { store, logger, media } = this.services;
    const { adapter, route, entry } = target;
    const files = req.attachments ?? [];
    const caps = adapter.capabilities.media;
    const text = req.text.trim();
    if (!caps || !media) {
      const names = files.map((f) => `[file: ${f.name ?? f.mediaId}]`).join("\n");
      return this.#post(target, text ? `${text}\n${names}` : names, req.idempotencyKey, { kind: "reply" });
    }
    const resolved: OutboundAttachment[] = [];
    for (const f of files) {
      const a = await outboundAttachment(media, f);
      if (!a) return { status: "failed", error: `no stored media ${f.mediaId} (unknown or past retention)` };
      resolved.push(a);
    }
    const caption = text.length <= caps.captionLimit ? text : "";
    const ids: string[] = [];
    if (text && !caption) {
      const r = await this.#post(target, text, req.idempotencyKey, { kind: "reply" });
      if (r.status === "sent") ids.push(...r.messageIds);
      else if (r.status !== "duplicate") return r;
    }
    const id = `${req.idempotencyKey}#files`;
    const lease = await this.#lease(id);
    if (lease === "done")
      return ids.length
        ? { status: "sent", channel: route.channel, messageIds: ids }
        : { status: "duplicate" };
    if (lease === "busy")
      return { status: "failed", error: `${route.channel}: ${id} is being sent by another worker` };
    try {
      const res = await this.#withRetry(() =>
        adapter.send({
          accountId: route.accountId ?? adapter.accountId,
          to: route.to,
          ...(route.threadId ? { threadId: route.threadId } : {}),
          format: adapter.capabilities.markdown === "plain" ? "plain" : "native",
          text: caption,
          attachments: resolved,
        }),
      );
      await store.outbox.complete(id, res, OUTBOX_TTL_MS);
      ids.push(...res.messageIds);
      return { status: "sent", channel: route.channel, messageIds: ids };
    } catch (err) {
      await store.outbox.release(id);
      logger.warn({ err, sessionKey: entry.key, channel: route.channel }, "delivery of files failed");
      return { status: "failed", error: `${route.channel}: ${errorMessage(err)}` };
    }
  }

  /** Takes the chunk's lease, waiting out another sender's live lease a bounded number of times. */
  async #lease(id: string): Promise<"fresh" | "expired" | "done" | "busy"> {
    const { store } = this.services;
    for (let wait = 0; ; wait++) {
      const r = await store.outbox.lease(id, this.leaseMs, OUTBOX_TTL_MS);
      if (r.acquired) return r.expired ? "expired" : "fresh";
      if (r.state === "done") return "done";
      if (wait >= MAX_LEASE_WAITS) return "busy";
      await this.sleep(Math.min(this.leaseMs, r.retryInMs + 10));
    }
  }

  /** A send or edit, retried when the platform rate-limits (bounded). */
  async #withRetry<T>(op: () => Promise<T>): Promise<T> {
    return retryLoop(op, {
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

/** A stored file as an adapter sends it: fresh streams from the media store, typed by its bytes. */
async function outboundAttachment(
  media: MediaStore,
  f: { mediaId: string; name?: string; voice?: boolean },
): Promise<OutboundAttachment | null> {
  const stored = await media.stat(f.mediaId);
  if (!stored) return null;
  const family = stored.mimeType.split("/")[0];
  const kind = family === "image" || family === "audio" || family === "video" ? family : "file";
  const open = async (): Promise<NodeJS.ReadableStream> => {
    const s = await media.open(f.mediaId);
    if (!s) throw new Error(`media ${f.mediaId} is no longer stored`);
    return s;
  };
  return {
    mediaId: stored.mediaId,
    kind,
    mimeType: stored.mimeType,
    name: f.name ?? defaultName(kind, stored.mimeType),
    bytes: stored.bytes,
    ...(f.voice && kind === "audio" ? { voice: true } : {}),
    open,
    async read() {
      const r = await media.read(f.mediaId, stored.bytes);
      if (!r) throw new Error(`media ${f.mediaId} is no longer stored`);
      return r.data;
    },
  };
}
