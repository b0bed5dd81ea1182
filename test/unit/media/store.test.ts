import { createHash } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FsMediaStore } from "../../../src/media/fs/store.js";
import { S3MediaStore } from "../../../src/media/s3/store.js";
import { type MediaStore, MediaStoreError } from "../../../src/media/types.js";

/**
 * The media store contract (API.md §8.1), run on both drivers: `fs` in a temp dir, `s3` against a
 * loopback S3 server (s3rver) through the real AWS SDK client.
 */

const DAY = 24 * 3600_000;
// A 1x1 PNG.
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5d8b6d10000000049454e44ae426082",
  "hex",
);

async function* chunks(...parts: Buffer[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield p;
}

async function readAll(s: Readable | null): Promise<Buffer | null> {
  if (!s) return null;
  const out: Buffer[] = [];
  for await (const c of s) out.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(out);
}

/** This process's open files whose path ends with `name` (from /proc/self/fd). */
function openFilesNamed(name: string): string[] {
  const out: string[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.endsWith(name)) out.push(target);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

const sha = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

interface Harness {
  make(now: () => number): MediaStore;
  /** Files the driver left in its local dirs (fs: the store dir; s3: the spool dir). */
  localFiles(): string[];
}

function contract(name: string, harness: () => Harness) {
  describe(`media store contract: ${name}`, () => {
    let clock = Date.now();
    const now = () => clock;
    let store: MediaStore;
    beforeAll(() => {
      store = harness().make(now);
    });
    afterAll(async () => {
      await store.close();
    });

    it("stores a stream content-addressed and gives the same bytes and the sniffed type back", async () => {
      const stored = await store.put(chunks(PNG.subarray(0, 10), PNG.subarray(10)), {
        maxBytes: 1000,
        declaredType: "application/pdf", // lies: the bytes are a PNG
      });
      expect(stored).toMatchObject({ mediaId: sha(PNG), mimeType: "image/png", bytes: PNG.length });
      expect(await readAll(await store.open(stored.mediaId))).toEqual(PNG);
      expect(await store.stat(stored.mediaId)).toMatchObject({ mimeType: "image/png", bytes: PNG.length });
    });

    it("deduplicates: the same bytes twice are one file with one id", async () => {
      const a = await store.put(chunks(Buffer.from("hello world\n")), { maxBytes: 100, name: "a.txt" });
      const b = await store.put(chunks(Buffer.from("hello "), Buffer.from("world\n")), {
        maxBytes: 100,
        name: "b.md",
      });
      expect(a.mediaId).toBe(b.mediaId);
      expect(a.mimeType).toBe("text/plain");
      expect(
        harness()
          .localFiles()
          .filter((f) => f.startsWith(".tmp-")),
      ).toEqual([]);
    });

    it("refuses past maxBytes mid-stream and keeps nothing", async () => {
      const big = Buffer.alloc(5000, 7);
      const err = await store.put(chunks(big, big), { maxBytes: 6000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MediaStoreError);
      expect((err as MediaStoreError).reason).toBe("too_large");
      expect(await store.stat(sha(Buffer.concat([big, big])))).toBeNull();
      expect(
        harness()
          .localFiles()
          .filter((f) => f.startsWith(".tmp-")),
      ).toEqual([]);
    });

    it("a source that fails midway leaves nothing visible", async () => {
      async function* broken(): AsyncGenerator<Uint8Array> {
        yield Buffer.from("partial");
        throw new Error("connection reset");
      }
      const err = await store.put(broken(), { maxBytes: 100 }).catch((e: unknown) => e);
      expect((err as MediaStoreError).reason).toBe("io");
      expect(await store.stat(sha(Buffer.from("partial")))).toBeNull();
      expect(
        harness()
          .localFiles()
          .filter((f) => f.startsWith(".tmp-")),
      ).toEqual([]);
    });

    it("reads a file whole into one buffer, or its first maxBytes with cut, with when it expires", async () => {
      const bytes = Buffer.alloc(70_000);
      for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 255;
      const stored = await store.put(chunks(bytes.subarray(0, 40_000), bytes.subarray(40_000)), {
        maxBytes: 100_000,
      });
      // both harnesses keep files 7 days; expiresAt is the store's own retention from storedAt
      const expiresAt = ((await store.stat(stored.mediaId))?.storedAt ?? Number.NaN) + 7 * DAY;
      const size = bytes.length;
      expect(await store.read(stored.mediaId, 100_000)).toEqual({ data: bytes, cut: false, size, expiresAt });
      expect(await store.read(stored.mediaId, 70_000)).toEqual({ data: bytes, cut: false, size, expiresAt });
      expect(await store.read(stored.mediaId, 1000)).toEqual({
        data: bytes.subarray(0, 1000),
        cut: true,
        size,
        expiresAt,
      });
      expect(await store.read(`sha256:${"0".repeat(64)}`, 10)).toBeNull();
      expect(await store.read("sha256:../../etc/passwd", 10)).toBeNull();
      // an empty file (s3 answers a range on it with 416 InvalidRange)
      const empty = await store.put(chunks(Buffer.alloc(0)), { maxBytes: 10 });
      expect(await store.read(empty.mediaId, 10)).toMatchObject({
        data: Buffer.alloc(0),
        cut: false,
        size: 0,
      });
    });

    it("reads a file into a scratch buffer piece by piece (fs: views of it), each piece whole until the next is asked for", async () => {
      const bytes = Buffer.alloc(70_001);
      for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 13 + 1) & 255;
      const stored = await store.put(chunks(bytes), { maxBytes: 100_000 });
      const scratch = Buffer.alloc(16_384);
      const copies: Buffer[] = [];
      let views = 0;
      const it = await store.openInto(stored.mediaId, scratch);
      if (!it) throw new Error("not found");
      for await (const piece of it) {
        if (piece.buffer === scratch.buffer) views++;
        copies.push(Buffer.from(piece));
      }
      expect(Buffer.concat(copies).equals(bytes)).toBe(true);
      if (store.driver === "fs") expect(views).toBe(copies.length);
      expect(await store.openInto(`sha256:${"0".repeat(64)}`, scratch)).toBeNull();
      // stopped after a piece, or before the first: the file is not left open
      const hex = stored.mediaId.slice("sha256:".length);
      for await (const _ of (await store.openInto(stored.mediaId, scratch)) ?? []) break;
      await (await store.openInto(stored.mediaId, scratch))?.[Symbol.asyncIterator]().return?.();
      if (store.driver === "fs") expect(openFilesNamed(hex)).toEqual([]);
    });

    it("unknown and malformed ids are null, never a path", async () => {
      expect(await store.stat(`sha256:${"0".repeat(64)}`)).toBeNull();
      expect(await store.open(`sha256:${"0".repeat(64)}`)).toBeNull();
      expect(await store.open("sha256:../../etc/passwd")).toBeNull();
      expect(await store.stat("../x")).toBeNull();
    });

    it("prunes after retention; a file is gone (404) once past it", async () => {
      const old = await store.put(chunks(Buffer.from("old file")), { maxBytes: 100 });
      clock += 8 * DAY;
      const fresh = await store.put(chunks(Buffer.from("fresh file")), { maxBytes: 100 });
      expect(await store.stat(old.mediaId)).toBeNull();
      expect(await store.open(old.mediaId)).toBeNull();
      expect(await store.prune()).toBeGreaterThanOrEqual(1);
      expect(await store.stat(fresh.mediaId)).not.toBeNull();
      clock += 8 * DAY;
      await store.prune();
      expect(await store.stat(fresh.mediaId)).toBeNull();
    });
  });
}

let fsDir = "";
contract("fs", () => ({
  make: (now) => {
    fsDir ||= path.join(mkdtempSync(path.join(os.tmpdir(), "sb-media-")), "media");
    return new FsMediaStore(fsDir, 7 * DAY, now);
  },
  localFiles: () => readdirSync(fsDir),
}));

let s3: S3rver | null = null;
let s3Port = 0;
const s3Root = mkdtempSync(path.join(os.tmpdir(), "sb-s3-"));
const spoolDir = path.join(s3Root, "spool");
beforeAll(async () => {
  s3 = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory: path.join(s3Root, "data"),
    configureBuckets: [{ name: "media-test", configs: [] }],
  });
  const addr = (await s3.run()) as { port: number };
  s3Port = addr.port;
});
afterAll(async () => {
  await s3?.close();
  rmSync(s3Root, { recursive: true, force: true });
  if (fsDir) rmSync(path.dirname(fsDir), { recursive: true, force: true });
});
contract("s3 (s3rver on loopback)", () => ({
  make: (now) =>
    new S3MediaStore({
      bucket: "media-test",
      prefix: "m/",
      region: "us-east-1",
      endpoint: `http://127.0.0.1:${s3Port}`,
      forcePathStyle: true,
      accessKeyId: "S3RVER",
      secretAccessKey: "S3RVER",
      spoolDir,
      retentionMs: 7 * DAY,
      now,
    }),
  localFiles: () => readdirSync(spoolDir),
}));

describe("fs media store: permissions and links", () => {
  it("files are 0600 under a 0700 dir, and a link in place of a file is never followed", async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "sb-media-"));
    try {
      const dir = path.join(root, "media");
      const store = new FsMediaStore(dir, DAY);
      const s = await store.put(chunks(Buffer.from("secret-ish")), { maxBytes: 100 });
      expect(lstatSync(dir).mode & 0o777).toBe(0o700);
      const hex = s.mediaId.slice(7);
      expect(lstatSync(path.join(dir, hex)).mode & 0o777).toBe(0o600);
      // A link planted under a valid id is not served.
      writeFileSync(path.join(root, "passwd"), "root:x:0:0");
      const fake = createHash("sha256").update("x").digest("hex");
      symlinkSync(path.join(root, "passwd"), path.join(dir, fake));
      expect(await store.open(`sha256:${fake}`)).toBeNull();
      expect(await store.stat(`sha256:${fake}`)).toBeNull();
      // A store dir that is a link is refused.
      mkdirSync(path.join(root, "real"));
      symlinkSync(path.join(root, "real"), path.join(root, "linked"));
      const linked = new FsMediaStore(path.join(root, "linked"), DAY);
      await expect(linked.put(chunks(Buffer.from("x")), { maxBytes: 10 })).rejects.toThrow(
        /not a plain directory/,
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
