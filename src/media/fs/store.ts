import { constants } from "node:fs";
import { lstat, open, readdir, readFile, rename, unlink, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { ensurePrivateDir, spool } from "../ingest.js";
import { type MediaRead, type MediaStore, mediaHex, type PutOptions, type StoredMedia } from "../types.js";

/**
 * The `fs` media store (the embedded default): `<dir>/<hex>` holds the bytes, `<dir>/<hex>.json`
 * their type. Files are 0600 in a 0700 dir, never opened through a link (O_NOFOLLOW, lstat),
 * published by rename once complete; retention counts from the file's mtime.
 */

const HEX_RE = /^[0-9a-f]{64}$/;
/** A temp file left by a crash is removed by the next prune after this long. */
const STALE_TEMP_MS = 60 * 60 * 1000;

interface Meta {
  mimeType: string;
  bytes: number;
}

export class FsMediaStore implements MediaStore {
  readonly driver = "fs" as const;
  #ready: Promise<void> | null = null;

  constructor(
    private readonly dir: string,
    private readonly retentionMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  #init(): Promise<void> {
    this.#ready ??= ensurePrivateDir(this.dir);
    return this.#ready;
  }

  async put(source: AsyncIterable<Uint8Array>, opts: PutOptions): Promise<StoredMedia> {
    await this.#init();
    const s = await spool(this.dir, source, opts);
    const data = path.join(this.dir, s.hex);
    const meta = `${data}.json`;
    const t = new Date(this.now());
    try {
      const existing = await this.#lstatFile(data);
      if (existing && existing.size === s.bytes) {
        // Already stored: refresh its age, keep the first copy's bytes.
        await unlink(s.file);
        await utimes(data, t, t);
        const m = await this.#meta(s.hex);
        return {
          mediaId: `sha256:${s.hex}`,
          mimeType: m?.mimeType ?? s.mimeType,
          bytes: s.bytes,
          storedAt: t.getTime(),
        };
      }
      const metaTmp = `${s.file}.json`;
      await writeFile(metaTmp, JSON.stringify({ mimeType: s.mimeType, bytes: s.bytes } satisfies Meta), {
        mode: 0o600,
        flag: constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      });
      await rename(metaTmp, meta);
      await utimes(s.file, t, t);
      await rename(s.file, data);
    } catch (err) {
      await unlink(s.file).catch(() => undefined);
      throw err;
    }
    return { mediaId: `sha256:${s.hex}`, mimeType: s.mimeType, bytes: s.bytes, storedAt: t.getTime() };
  }

  async stat(mediaId: string): Promise<StoredMedia | null> {
    const hex = mediaHex(mediaId);
    if (!hex) return null;
    await this.#init();
    const st = await this.#lstatFile(path.join(this.dir, hex));
    if (!st || this.#expired(st.mtimeMs)) return null;
    const m = await this.#meta(hex);
    return {
      mediaId,
      mimeType: m?.mimeType ?? "application/octet-stream",
      bytes: st.size,
      storedAt: st.mtimeMs,
    };
  }

  async open(mediaId: string): Promise<Readable | null> {
    const file = await this.#openFile(mediaId);
    // The stream owns the handle and closes it at the end (or on destroy).
    return file ? file.fh.createReadStream() : null;
  }

  async openInto(mediaId: string, scratch: Buffer): Promise<AsyncIterable<Uint8Array> | null> {
    const file = await this.#openFile(mediaId);
    if (!file) return null;
    const { fh } = file;
    let at = 0;
    let open = true;
    const close = async () => {
      if (open) {
        open = false;
        await fh.close();
      }
    };
    // An iterator of its own, not a generator: one ended before its first piece never runs a
    // generator's finally, which left the handle for GC to close.
    const pieces: AsyncIterator<Uint8Array> = {
      async next() {
        if (!open) return { done: true, value: undefined };
        try {
          const { bytesRead } = await fh.read(scratch, 0, scratch.length, at);
          if (bytesRead > 0) {
            at += bytesRead;
            return { done: false, value: scratch.subarray(0, bytesRead) };
          }
        } catch (err) {
          await close();
          throw err;
        }
        await close();
        return { done: true, value: undefined };
      },
      async return() {
        await close();
        return { done: true, value: undefined };
      },
    };
    return { [Symbol.asyncIterator]: () => pieces };
  }

  async read(mediaId: string, maxBytes: number): Promise<MediaRead | null> {
    const file = await this.#openFile(mediaId);
    if (!file) return null;
    try {
      const data = Buffer.allocUnsafe(Math.min(file.size, maxBytes));
      let at = 0;
      while (at < data.length) {
        const { bytesRead } = await file.fh.read(data, at, data.length - at, at);
        if (bytesRead === 0) break;
        at += bytesRead;
      }
      return {
        data: data.subarray(0, at),
        cut: file.size > maxBytes,
        size: file.size,
        expiresAt: file.storedAt + this.retentionMs,
      };
    } finally {
      await file.fh.close();
    }
  }

  /** The file opened (never through a link), or null: unknown, malformed or past retention. */
  async #openFile(
    mediaId: string,
  ): Promise<{ fh: Awaited<ReturnType<typeof open>>; size: number; storedAt: number } | null> {
    const hex = mediaHex(mediaId);
    if (!hex) return null;
    await this.#init();
    let fh: Awaited<ReturnType<typeof open>>;
    try {
      fh = await open(path.join(this.dir, hex), constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch {
      return null;
    }
    const st = await fh.stat();
    if (!st.isFile() || this.#expired(st.mtimeMs)) {
      await fh.close();
      return null;
    }
    return { fh, size: st.size, storedAt: st.mtimeMs };
  }

  async prune(now = this.now()): Promise<number> {
    await this.#init();
    let removed = 0;
    for (const name of await readdir(this.dir)) {
      const full = path.join(this.dir, name);
      const st = await lstat(full).catch(() => null);
      if (!st?.isFile()) continue;
      if (name.startsWith(".tmp-")) {
        if (now - st.mtimeMs > STALE_TEMP_MS) await unlink(full).catch(() => undefined);
        continue;
      }
      if (!HEX_RE.test(name) || now - st.mtimeMs <= this.retentionMs) continue;
      await unlink(full).catch(() => undefined);
      await unlink(`${full}.json`).catch(() => undefined);
      removed++;
    }
    // Type files whose bytes are gone.
    for (const name of await readdir(this.dir)) {
      const m = /^([0-9a-f]{64})\.json$/.exec(name);
      if (m?.[1] && !(await this.#lstatFile(path.join(this.dir, m[1]))))
        await unlink(path.join(this.dir, name)).catch(() => undefined);
    }
    return removed;
  }

  async close(): Promise<void> {}

  #expired(mtimeMs: number): boolean {
    return this.now() - mtimeMs > this.retentionMs;
  }

  async #lstatFile(file: string) {
    const st = await lstat(file).catch(() => null);
    return st?.isFile() ? st : null;
  }

  async #meta(hex: string): Promise<Meta | null> {
    try {
      const fh = await open(path.join(this.dir, `${hex}.json`), constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        const v = JSON.parse(await readFile(fh, "utf8")) as Partial<Meta>;
        return typeof v.mimeType === "string" ? { mimeType: v.mimeType, bytes: Number(v.bytes ?? 0) } : null;
      } finally {
        await fh.close();
      }
    } catch {
      return null;
    }
  }
}
