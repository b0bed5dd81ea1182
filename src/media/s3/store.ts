import { createReadStream } from "node:fs";
import { unlink } from "node:fs/promises";
import { Readable } from "node:stream";
import {
  CopyObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { ensurePrivateDir, spool } from "../ingest.js";
import { type MediaRead, type MediaStore, mediaHex, type PutOptions, type StoredMedia } from "../types.js";

/**
 * The `s3` media store, for several gateways sharing files: any S3-compatible service (AWS S3,
 * MinIO, R2, Garage) through the AWS SDK v3. A file is spooled to a private local dir while it is
 * hashed, then uploaded under `<prefix><hex>` (the content type on the object); an object exists
 * only once its upload completed. Retention counts from the object's LastModified (a dedup
 * refreshes it with a copy onto itself).
 */

export interface S3MediaOptions {
  bucket: string;
  prefix: string;
  region: string;
  endpoint?: string;
  forcePathStyle: boolean;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Local 0700 dir for files being hashed before upload. */
  spoolDir: string;
  retentionMs: number;
  now?: () => number;
}

/** Listing pages a prune reads at most (1000 keys each). */
const MAX_PRUNE_PAGES = 1000;

export class S3MediaStore implements MediaStore {
  readonly driver = "s3" as const;
  readonly #s3: S3Client;
  readonly #now: () => number;
  #ready: Promise<void> | null = null;

  constructor(private readonly opts: S3MediaOptions) {
    this.#now = opts.now ?? Date.now;
    this.#s3 = new S3Client({
      region: opts.region,
      forcePathStyle: opts.forcePathStyle,
      ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
      ...(opts.accessKeyId && opts.secretAccessKey
        ? { credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } }
        : {}),
      // Checksums only where the API requires them: S3-compatible services differ in support.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
      maxAttempts: 3,
    });
  }

  #key(hex: string): string {
    return `${this.opts.prefix}${hex}`;
  }

  async put(source: AsyncIterable<Uint8Array>, opts: PutOptions): Promise<StoredMedia> {
    this.#ready ??= ensurePrivateDir(this.opts.spoolDir);
    await this.#ready;
    const s = await spool(this.opts.spoolDir, source, opts);
    const Key = this.#key(s.hex);
    const { bucket: Bucket } = this.opts;
    try {
      const existing = await this.#head(Key);
      if (existing && existing.bytes === s.bytes) {
        await this.#s3.send(
          new CopyObjectCommand({
            Bucket,
            Key,
            CopySource: `${Bucket}/${Key}`,
            MetadataDirective: "REPLACE",
            ContentType: existing.mimeType,
            Metadata: { "stored-at": String(this.#now()) },
          }),
        );
        return {
          mediaId: `sha256:${s.hex}`,
          mimeType: existing.mimeType,
          bytes: s.bytes,
          storedAt: this.#now(),
        };
      }
      await this.#s3.send(
        new PutObjectCommand({
          Bucket,
          Key,
          Body: createReadStream(s.file),
          ContentLength: s.bytes,
          ContentType: s.mimeType,
          Metadata: { "stored-at": String(this.#now()) },
        }),
      );
      return { mediaId: `sha256:${s.hex}`, mimeType: s.mimeType, bytes: s.bytes, storedAt: this.#now() };
    } finally {
      await unlink(s.file).catch(() => undefined);
    }
  }

  async #head(Key: string): Promise<{ mimeType: string; bytes: number; storedAt: number } | null> {
    try {
      const h = await this.#s3.send(new HeadObjectCommand({ Bucket: this.opts.bucket, Key }));
      return {
        mimeType: h.ContentType ?? "application/octet-stream",
        bytes: h.ContentLength ?? 0,
        storedAt: Number(h.Metadata?.["stored-at"]) || (h.LastModified?.getTime() ?? 0),
      };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async stat(mediaId: string): Promise<StoredMedia | null> {
    const hex = mediaHex(mediaId);
    if (!hex) return null;
    const h = await this.#head(this.#key(hex));
    if (!h || this.#expired(h.storedAt)) return null;
    return { mediaId, ...h };
  }

  async open(mediaId: string): Promise<Readable | null> {
    return (await this.#get(mediaId))?.body ?? null;
  }

  /** No view of `scratch`: the SDK's stream gives its own chunks. */
  async openInto(mediaId: string, _scratch: Buffer): Promise<AsyncIterable<Uint8Array> | null> {
    return this.open(mediaId);
  }

  /**
   * The object's body, its size (as the answer says it) and when it was stored, or null (unknown,
   * malformed or past retention). No Range GET: an empty object's range is answered differently
   * by S3-compatible servers (416, the whole object, or a length its body does not have).
   */
  async #get(
    mediaId: string,
  ): Promise<{ body: Readable; size: number | undefined; storedAt: number } | null> {
    const hex = mediaHex(mediaId);
    if (!hex) return null;
    try {
      const r = await this.#s3.send(new GetObjectCommand({ Bucket: this.opts.bucket, Key: this.#key(hex) }));
      const storedAt = Number(r.Metadata?.["stored-at"]) || (r.LastModified?.getTime() ?? 0);
      if (this.#expired(storedAt)) {
        (r.Body as Readable | undefined)?.destroy?.();
        return null;
      }
      const body = r.Body;
      if (!body) return null;
      const size = r.ContentLength;
      if (body instanceof Readable) return { body, size, storedAt };
      return {
        body: Readable.fromWeb(body.transformToWebStream() as Parameters<typeof Readable.fromWeb>[0]),
        size,
        storedAt,
      };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  /**
   * The first `maxBytes`: the rest of the answer is not read (its connection is closed), unless
   * the answer did not say its length (S3 says it on every GET); then the rest is counted.
   */
  async read(mediaId: string, maxBytes: number): Promise<MediaRead | null> {
    const got = await this.#get(mediaId);
    if (!got) return null;
    const { body, size } = got;
    const expiresAt = got.storedAt + this.opts.retentionMs;
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of body) {
      const b = c as Uint8Array;
      if (n < maxBytes)
        chunks.push(Buffer.from(b.buffer, b.byteOffset, Math.min(b.byteLength, maxBytes - n)));
      n += b.byteLength;
      if (n > maxBytes && size !== undefined) {
        body.destroy();
        break;
      }
    }
    const data = Buffer.concat(chunks);
    return { data, cut: n > maxBytes, size: size ?? n, expiresAt };
  }

  async prune(now = this.#now()): Promise<number> {
    const { bucket: Bucket, prefix: Prefix } = this.opts;
    let removed = 0;
    let token: string | undefined;
    for (let page = 0; page < MAX_PRUNE_PAGES; page++) {
      const r = await this.#s3.send(
        new ListObjectsV2Command({ Bucket, Prefix, ...(token ? { ContinuationToken: token } : {}) }),
      );
      const old = (r.Contents ?? []).filter(
        (o) =>
          o.Key &&
          /^[0-9a-f]{64}$/.test(o.Key.slice(Prefix.length)) &&
          o.LastModified &&
          now - o.LastModified.getTime() > this.opts.retentionMs,
      );
      // LastModified is the service's clock: confirm each candidate's own stored-at first.
      for (let i = old.length - 1; i >= 0; i--) {
        const h = await this.#head(old[i]?.Key as string).catch(() => null);
        if (h && now - h.storedAt <= this.opts.retentionMs) old.splice(i, 1);
      }
      if (old.length > 0) {
        await this.#s3.send(
          new DeleteObjectsCommand({
            Bucket,
            Delete: { Objects: old.map((o) => ({ Key: o.Key as string })), Quiet: true },
          }),
        );
        removed += old.length;
      }
      if (!r.IsTruncated || !r.NextContinuationToken) break;
      token = r.NextContinuationToken;
    }
    return removed;
  }

  async close(): Promise<void> {
    this.#s3.destroy();
  }

  #expired(storedAt: number): boolean {
    return this.#now() - storedAt > this.opts.retentionMs;
  }
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === "NotFound" || e?.name === "NoSuchKey" || e?.$metadata?.httpStatusCode === 404;
}
