import type { InboundAttachment, MediaPart, MediaSink } from "../channels/types.js";
import type { MediaConfig } from "../config/media.js";
import type { Logger } from "../log.js";
import { defaultName, sanitizeFilename } from "./names.js";
import { resolveAttachments } from "./resolve.js";
import { type MediaStore, MediaStoreError } from "./types.js";

/**
 * The media sink the app hands every adapter (API.md §8.1): each attachment is checked against the
 * channel's `mediaMaxMb` and `media.maxBytes` of its kind before anything is fetched (when the
 * size is declared), streamed into the store through the platform's own download, aborted past
 * the cap or when it stalls, and typed by its bytes. One part per attachment, in order; never
 * throws: what could not be taken is a `media_note` with its reason.
 */

export interface SinkOptions {
  /** A download that sends nothing for this long is aborted (default 30 s). */
  stallMs?: number;
  /** A download that takes longer than this in all is aborted (default 10 min). */
  totalMs?: number;
  /** `channels.<name>.mediaMaxMb` in bytes, by channel (the adapter's `maxBytes` is capped by it). */
  channelMaxBytes?: (channel: string) => number | undefined;
}

type Kind = "image" | "audio" | "video" | "file";

function capKind(kind: InboundAttachment["kind"]): Kind {
  return kind === "sticker" ? "image" : kind;
}

/** The part's kind from what the bytes are (a "photo" that is a PDF is a file). */
function partKind(declared: InboundAttachment["kind"], mime: string): Kind {
  const family = mime.split("/")[0];
  if (declared === "image" || declared === "sticker") return family === "image" ? "image" : "file";
  if (declared === "audio") return family === "audio" || family === "video" ? "audio" : "file";
  if (declared === "video") return family === "video" ? "video" : family === "audio" ? "audio" : "file";
  return "file";
}

/**
 * The iterator's next chunk, or the signal's reason once it aborts (a stalled SDK stream cannot
 * hang the download). The abort listener lives for this one chunk: racing each chunk against
 * one long-lived promise instead left a reaction per chunk on it, each holding its chunk, so a
 * 49 MiB video stayed in memory whole until the download ended.
 */
function nextUnlessAborted<T>(it: AsyncIterator<T>, signal: AbortSignal): Promise<IteratorResult<T>> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<IteratorResult<T>>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    it.next().then(
      (r) => {
        signal.removeEventListener("abort", onAbort);
        resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

export class StoreMediaSink implements MediaSink {
  readonly #stallMs: number;
  readonly #totalMs: number;

  constructor(
    private readonly store: MediaStore,
    private readonly config: Pick<MediaConfig, "maxBytes">,
    private readonly logger: Logger,
    private readonly opts: SinkOptions = {},
  ) {
    this.#stallMs = opts.stallMs ?? 30_000;
    this.#totalMs = opts.totalMs ?? 10 * 60_000;
  }

  async take(
    attachments: readonly InboundAttachment[],
    opts: { channel: string; accountId: string; maxBytes: number; signal?: AbortSignal },
  ): Promise<MediaPart[]> {
    const parts: MediaPart[] = [];
    for (const a of attachments) parts.push(await this.#takeOne(a, opts));
    return parts;
  }

  resolve(
    attachments: ReadonlyArray<{ mediaId: string; name?: string }>,
    field: string,
  ): Promise<MediaPart[]> {
    return resolveAttachments(this.store, attachments, field);
  }

  async #takeOne(
    a: InboundAttachment,
    opts: { channel: string; accountId: string; maxBytes: number; signal?: AbortSignal },
  ): Promise<MediaPart> {
    const name = sanitizeFilename(a.name);
    const note = (
      reason: Extract<MediaPart, { type: "media_note" }>["reason"],
      extra: { mimeType?: string; bytes?: number } = {},
    ): MediaPart => ({
      type: "media_note",
      reason,
      ...(name ? { name } : {}),
      ...((extra.mimeType ?? a.mimeType) ? { mimeType: (extra.mimeType ?? a.mimeType) as string } : {}),
      ...((extra.bytes ?? a.bytes) !== undefined ? { bytes: (extra.bytes ?? a.bytes) as number } : {}),
    });
    const channelCap = this.opts.channelMaxBytes?.(opts.channel);
    const maxBytes = Math.floor(
      Math.min(opts.maxBytes, channelCap ?? Number.POSITIVE_INFINITY, this.config.maxBytes[capKind(a.kind)]),
    );
    if (a.bytes !== undefined && a.bytes > maxBytes) return note("too_large");

    const ctrl = new AbortController();
    const onOuter = () => ctrl.abort(opts.signal?.reason);
    opts.signal?.addEventListener("abort", onOuter, { once: true });
    if (opts.signal?.aborted) ctrl.abort(opts.signal.reason);
    let stall = setTimeout(() => ctrl.abort(new Error("download stalled")), this.#stallMs);
    const total = setTimeout(() => ctrl.abort(new Error("download took too long")), this.#totalMs);
    const stallMs = this.#stallMs;
    const aborted = new Promise<never>((_, reject) => {
      if (ctrl.signal.aborted) reject(ctrl.signal.reason);
      ctrl.signal.addEventListener("abort", () => reject(ctrl.signal.reason), { once: true });
    });
    aborted.catch(() => undefined);
    try {
      const source = await Promise.race([a.open(ctrl.signal), aborted]);
      async function* watched(): AsyncGenerator<Uint8Array> {
        const it = source[Symbol.asyncIterator]();
        try {
          for (;;) {
            const r = await nextUnlessAborted(it, ctrl.signal);
            if (r.done) return;
            clearTimeout(stall);
            stall = setTimeout(() => ctrl.abort(new Error("download stalled")), stallMs);
            yield r.value;
          }
        } finally {
          void it.return?.()?.catch?.(() => undefined);
        }
      }
      const stored = await this.store.put(watched(), {
        maxBytes,
        signal: ctrl.signal,
        ...(a.mimeType ? { declaredType: a.mimeType } : {}),
        ...(name ? { name } : {}),
      });
      const kind = partKind(a.kind, stored.mimeType);
      const base = { mediaId: stored.mediaId, mimeType: stored.mimeType, bytes: stored.bytes };
      switch (kind) {
        case "image":
          return {
            type: "image",
            ...base,
            ...(a.width ? { width: a.width } : {}),
            ...(a.height ? { height: a.height } : {}),
            ...(name ? { name } : {}),
          };
        case "audio":
          return {
            type: "audio",
            ...base,
            voice: a.voice === true,
            ...(a.durationSeconds !== undefined ? { durationSeconds: a.durationSeconds } : {}),
            ...(name ? { name } : {}),
          };
        case "video":
          return {
            type: "video",
            ...base,
            ...(a.durationSeconds !== undefined ? { durationSeconds: a.durationSeconds } : {}),
            ...(name ? { name } : {}),
          };
        default:
          return { type: "file", ...base, name: name ?? defaultName("file", stored.mimeType) };
      }
    } catch (err) {
      // Whatever went wrong, the platform download stops here.
      if (!ctrl.signal.aborted) ctrl.abort(err);
      if (err instanceof MediaStoreError && err.reason === "too_large") return note("too_large");
      this.logger.warn(
        { channel: opts.channel, accountId: opts.accountId, kind: a.kind, err: (err as Error)?.message },
        "media: download failed",
      );
      return note("download_failed");
    } finally {
      clearTimeout(stall);
      clearTimeout(total);
      opts.signal?.removeEventListener("abort", onOuter);
    }
  }
}
