import type { Readable } from "node:stream";

/**
 * The media store contract (API.md §8.1): content-addressed (`sha256:<hex>`), deduplicated,
 * streamed in and out, pruned after `media.store.retention`. Two drivers implement it
 * (`fs/`, `s3/`); the app picks one (src/app/media.ts).
 */

export const MEDIA_ID_RE = /^sha256:([0-9a-f]{64})$/;

export interface StoredMedia {
  mediaId: string;
  /** Sniffed from the bytes (`file-type`); the declared type only for text the sniffer cannot name. */
  mimeType: string;
  bytes: number;
  /** Last time the file was stored (a dedup refreshes it); retention counts from here. */
  storedAt: number;
}

export interface PutOptions {
  /** Abort past this many bytes: nothing is kept (`MediaStoreError` code `too_large`). */
  maxBytes: number;
  /** The type the platform or sender claims; used only when the bytes name no type. */
  declaredType?: string;
  /** The file's name (its extension helps name text types the sniffer cannot see). */
  name?: string;
  signal?: AbortSignal;
}

/** What `MediaStore.read` gives: the bytes read, whether the file went on, its size, when it expires. */
export interface MediaRead {
  data: Buffer;
  cut: boolean;
  size: number;
  expiresAt: number;
}

export interface MediaStore {
  readonly driver: "fs" | "s3";
  /** Streams `source` in (hashing while writing); the file is visible only once complete. */
  put(source: AsyncIterable<Uint8Array>, opts: PutOptions): Promise<StoredMedia>;
  /** Metadata, or null for an unknown, malformed or pruned id. */
  stat(mediaId: string): Promise<StoredMedia | null>;
  /** A fresh stream of the bytes, or null (unknown, malformed or pruned). */
  open(mediaId: string): Promise<Readable | null>;
  /**
   * The bytes as `open` gives them, read into `scratch` where the driver can (fs): each piece
   * may then be a view of `scratch`, valid until the next piece is asked for. For a reader that
   * hands each piece on before it asks for the next (a picture written into a model request):
   * a file read this way makes no buffer of its own.
   */
  openInto(mediaId: string, scratch: Buffer): Promise<AsyncIterable<Uint8Array> | null>;
  /**
   * The bytes in one buffer, at most `maxBytes` of them (`cut` when the file is longer), the
   * file's `size`, and when it passes the retention (`expiresAt`, epoch ms), or null as `open`.
   * For what is read whole anyway (a voice note, a document) or by its head (a photo's header):
   * the fs driver reads the file straight into that buffer; the s3 driver stops reading its GET
   * there (and closes that connection).
   */
  read(mediaId: string, maxBytes: number): Promise<MediaRead | null>;
  /** Removes files older than the retention; returns how many. */
  prune(now?: number): Promise<number>;
  close(): Promise<void>;
}

export type MediaStoreErrorCode = "too_large" | "aborted" | "io";

export class MediaStoreError extends Error {
  constructor(
    readonly reason: MediaStoreErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "MediaStoreError";
  }
}

/** The hex digest of a well-formed id, or null. */
export function mediaHex(mediaId: string): string | null {
  return MEDIA_ID_RE.exec(mediaId)?.[1] ?? null;
}

/**
 * A picture's bytes as a request needs them: their size (a body's length is known before it is
 * written) and a fresh stream of them, read as each request is written. Nothing holds the bytes
 * between calls: a message kept for the next turn keeps this, not megabytes of picture.
 */
export interface PictureContent {
  readonly bytes: number;
  /**
   * A fresh stream of the bytes (`bytes` of them); rejects when they are no longer stored. With
   * `scratch`, pieces may be views of it, each valid until the next is asked for
   * (`MediaStore.openInto`).
   */
  open(scratch?: Buffer): Promise<AsyncIterable<Uint8Array> | Iterable<Uint8Array>>;
}
