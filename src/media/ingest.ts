import { createHash, randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { lstat, mkdir, open, unlink } from "node:fs/promises";
import path from "node:path";
import { sniffType } from "./sniff.js";
import { MediaStoreError, type PutOptions } from "./types.js";

/**
 * Streaming a file into a private temp file (both drivers): hashed while written, capped, never
 * the whole file in memory. The temp file lives in the store's own 0700 dir (fs) or a 0700 spool
 * dir (s3), so a rename publishes it atomically and nothing half-written is ever visible.
 */

const HEAD_BYTES = 4100;
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

/** Bytes gathered before they are written to the temp file. */
const WRITE_BATCH = 512 * 1024;

/** What is left of `chunks` after their first `n` bytes. */
function rest(chunks: Uint8Array[], n: number): Uint8Array[] {
  let i = 0;
  while (i < chunks.length && n >= chunks[i]!.byteLength) n -= chunks[i++]!.byteLength;
  const left = chunks.slice(i);
  if (n > 0 && left[0]) left[0] = left[0].subarray(n);
  return left;
}

export interface Spooled {
  file: string;
  hex: string;
  bytes: number;
  mimeType: string;
}

/** mkdir -p at 0700, refusing a symlink (or non-directory) in the final place. */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  const st = await lstat(dir);
  if (st.isSymbolicLink() || !st.isDirectory())
    throw new MediaStoreError("io", `media dir ${dir} is not a plain directory (links are not followed)`);
}

export async function spool(
  dir: string,
  source: AsyncIterable<Uint8Array>,
  opts: PutOptions,
): Promise<Spooled> {
  const file = path.join(dir, `.tmp-${process.pid}-${randomBytes(8).toString("hex")}`);
  const fh = await open(
    file,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    FILE_MODE,
  );
  const hash = createHash("sha256");
  const head = Buffer.alloc(HEAD_BYTES);
  let headLen = 0;
  let bytes = 0;
  let ok = false;
  // Chunks are written in batches of about WRITE_BATCH bytes: one file write (a thread-pool
  // round trip) per 64 KiB socket read made ~32 of them per 2 MB photo.
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  const flush = async () => {
    let batch = pending;
    pending = [];
    pendingBytes = 0;
    while (batch.length > 0) {
      const { bytesWritten } = await fh.writev(batch);
      batch = rest(batch, bytesWritten);
    }
  };
  try {
    for await (const chunk of source) {
      if (opts.signal?.aborted)
        throw new MediaStoreError("aborted", "the download was aborted", { cause: opts.signal.reason });
      bytes += chunk.byteLength;
      if (bytes > opts.maxBytes)
        throw new MediaStoreError("too_large", `the file is larger than ${opts.maxBytes} bytes`);
      hash.update(chunk);
      if (headLen < HEAD_BYTES) {
        const n = Math.min(HEAD_BYTES - headLen, chunk.byteLength);
        head.set(chunk.subarray(0, n), headLen);
        headLen += n;
      }
      pending.push(chunk);
      pendingBytes += chunk.byteLength;
      if (pendingBytes >= WRITE_BATCH) await flush();
    }
    await flush();
    if (opts.signal?.aborted)
      throw new MediaStoreError("aborted", "the download was aborted", { cause: opts.signal.reason });
    await fh.sync();
    ok = true;
  } catch (err) {
    if (err instanceof MediaStoreError) throw err;
    if (opts.signal?.aborted)
      throw new MediaStoreError("aborted", "the download was aborted", { cause: err });
    throw new MediaStoreError("io", `the download failed: ${(err as Error).message}`, { cause: err });
  } finally {
    await fh.close().catch(() => undefined);
    if (!ok) await unlink(file).catch(() => undefined);
  }
  try {
    const mimeType = await sniffType(file, head.subarray(0, headLen), opts.declaredType, opts.name);
    return { file, hex: hash.digest("hex"), bytes, mimeType };
  } catch (err) {
    await unlink(file).catch(() => undefined);
    throw err;
  }
}
