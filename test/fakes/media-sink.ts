/**
 * A small media sink for adapter tests (stands in for src/media's sink): refuses a declared size
 * over `maxBytes` without opening, streams each attachment into a temp dir while hashing it, aborts
 * past the cap or after `timeoutMs`, and answers parts with `mediaId = sha256:<hex>`. It records
 * what it was handed and what it stored so tests can check the bytes.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { InboundAttachment, MediaPart, MediaSink } from "../../src/channels/types.js";

export interface TakenFile {
  attachment: InboundAttachment;
  bytes: Buffer;
  mediaId: string;
}

export class TestMediaSink implements MediaSink {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), "sb-sink-"));
  readonly calls: Array<{ attachments: readonly InboundAttachment[]; channel: string; maxBytes: number }> =
    [];
  readonly stored = new Map<string, Buffer>();
  /** Attachments whose `open` was called. */
  opened = 0;
  /** Errors `open` or the stream threw, in order. */
  readonly failures: string[] = [];

  constructor(private readonly timeoutMs = 2000) {}

  async take(
    attachments: readonly InboundAttachment[],
    opts: { channel: string; accountId: string; maxBytes: number; signal?: AbortSignal },
  ): Promise<MediaPart[]> {
    this.calls.push({ attachments, channel: opts.channel, maxBytes: opts.maxBytes });
    const parts: MediaPart[] = [];
    for (const a of attachments) parts.push(await this.one(a, opts.maxBytes, opts.signal));
    return parts;
  }

  /** The stored bytes of a part. */
  bytesOf(part: MediaPart | undefined): Buffer | undefined {
    return part && "mediaId" in part ? this.stored.get(part.mediaId) : undefined;
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async one(a: InboundAttachment, maxBytes: number, outer?: AbortSignal): Promise<MediaPart> {
    const note = (reason: "too_large" | "download_failed"): MediaPart => ({
      type: "media_note",
      reason,
      ...(a.name !== undefined ? { name: a.name } : {}),
      ...(a.mimeType !== undefined ? { mimeType: a.mimeType } : {}),
      ...(a.bytes !== undefined ? { bytes: a.bytes } : {}),
    });
    if (a.bytes !== undefined && a.bytes > maxBytes) return note("too_large");
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error("download stalled")), this.timeoutMs);
    const onOuter = () => ctl.abort(outer?.reason);
    outer?.addEventListener("abort", onOuter);
    const chunks: Buffer[] = [];
    let total = 0;
    try {
      this.opened++;
      const stream = await a.open(ctl.signal);
      for await (const c of stream) {
        total += c.byteLength;
        if (total > maxBytes) {
          ctl.abort(new Error("over the cap"));
          return note("too_large");
        }
        chunks.push(Buffer.from(c));
        if (ctl.signal.aborted) throw ctl.signal.reason;
      }
    } catch (err) {
      this.failures.push(err instanceof Error ? err.message : String(err));
      return note("download_failed");
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onOuter);
    }
    const bytes = Buffer.concat(chunks);
    const mediaId = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    // The name is never used as a path: files are stored by their hash only.
    writeFileSync(path.join(this.dir, mediaId.slice(7)), bytes, { mode: 0o600 });
    this.stored.set(mediaId, bytes);
    const mimeType = a.mimeType ?? "application/octet-stream";
    switch (a.kind) {
      case "image":
      case "sticker":
        return { type: "image", mediaId, mimeType, bytes: bytes.length, ...(a.name ? { name: a.name } : {}) };
      case "audio":
        return {
          type: "audio",
          mediaId,
          mimeType,
          bytes: bytes.length,
          voice: a.voice === true,
          ...(a.durationSeconds !== undefined ? { durationSeconds: a.durationSeconds } : {}),
        };
      case "video":
        return {
          type: "video",
          mediaId,
          mimeType,
          bytes: bytes.length,
          ...(a.durationSeconds !== undefined ? { durationSeconds: a.durationSeconds } : {}),
          ...(a.name ? { name: a.name } : {}),
        };
      default:
        return { type: "file", mediaId, mimeType, bytes: bytes.length, name: a.name ?? "file" };
    }
  }
}

/** An OutboundAttachment over bytes in memory (what delivery resolves from the media store). */
export function outboundFile(
  bytes: Buffer,
  meta: { kind: "image" | "audio" | "video" | "file"; mimeType: string; name: string; voice?: boolean },
): import("../../src/channels/types.js").OutboundAttachment {
  const mediaId = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
  return {
    mediaId,
    ...meta,
    bytes: bytes.length,
    open: async () => {
      const { Readable } = await import("node:stream");
      return Readable.from([bytes]);
    },
    read: async () => bytes,
  };
}
