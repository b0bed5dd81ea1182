import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import sharp from "sharp";
import { afterAll, describe, expect, it, vi } from "vitest";
import { mediaSchema } from "../../../src/config/media.js";
import { silentLogger } from "../../../src/log.js";
import { FsMediaStore } from "../../../src/media/fs/store.js";
import type { PictureContent } from "../../../src/media/types.js";
import { MediaUnderstanding } from "../../../src/media/understand.js";

/**
 * Pictures for vision models (API.md §8.1): what understanding keeps per picture is its decision
 * and size, never its bytes (a session's kept messages must not pin megabytes per picture); each
 * request reads them from the store, or from the bounded cache of resized pictures.
 */

const root = mkdtempSync(path.join(os.tmpdir(), "sb-understand-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const RETENTION = 24 * 3600_000;
const store = new FsMediaStore(path.join(root, "media"), RETENTION);
const media = mediaSchema.parse({ understanding: { image: { maxSide: 256 } } });
const understanding = new MediaUnderstanding({ store, media, providers: {}, logger: silentLogger() });

async function bytesOf(c: PictureContent): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of await c.open()) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function put(buf: Buffer) {
  return store.put(
    (async function* () {
      yield buf;
    })(),
    { maxBytes: 10_000_000 },
  );
}

describe("pictures for vision models", () => {
  it("a picture sent as stored is read from the store by each request: its bytes are not held", async () => {
    const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: "#369" } })
      .png()
      .toBuffer();
    const stored = await put(png);
    const r = await understanding.image(stored);
    if (!r.ok) throw new Error(r.reason);
    expect(r.value).toMatchObject({ mimeType: "image/png", bytes: png.length });
    expect((await bytesOf(r.value)).equals(png)).toBe(true);
    // gone from the store (pruned past its retention): once the bytes read for the decision are
    // collected, the next request finds nothing held to send
    await store.prune(Date.now() + 2 * RETENTION);
    await new Promise((resolve) => setImmediate(resolve));
    v8.setFlagsFromString("--expose-gc");
    (vm.runInNewContext("gc") as () => void)();
    await expect(bytesOf(r.value)).rejects.toThrow(/no longer stored/);
  });

  it("a JPEG sent as stored is decided from its first 64 KiB, and each request reads it into the buffer it gives", async () => {
    const noise = Buffer.alloc(250 * 250 * 3);
    for (let i = 0; i < noise.length; i++) noise[i] = (i * 2654435761) >>> 24;
    const jpeg = await sharp(noise, { raw: { width: 250, height: 250, channels: 3 } })
      .jpeg({ quality: 100 })
      .toBuffer();
    expect(jpeg.length).toBeGreaterThan(65_536);
    const stored = await put(jpeg);
    const reads: number[] = [];
    const read = store.read.bind(store);
    const spy = vi.spyOn(store, "read").mockImplementation((id, max) => {
      reads.push(max);
      return read(id, max);
    });
    try {
      const r = await understanding.image(stored);
      if (!r.ok) throw new Error(r.reason);
      expect(r.value).toMatchObject({ mimeType: "image/jpeg", bytes: jpeg.length });
      expect(reads).toEqual([65_536]);
      const scratch = Buffer.alloc(32_768);
      const copies: Buffer[] = [];
      for await (const piece of await r.value.open(scratch)) {
        expect(piece.buffer).toBe(scratch.buffer);
        copies.push(Buffer.from(piece));
      }
      expect(Buffer.concat(copies).equals(jpeg)).toBe(true);
      expect(reads).toEqual([65_536]);
    } finally {
      spy.mockRestore();
    }
  });

  it("a JPEG whose header lies past its first 64 KiB (long comment segments first) is read whole to decide", async () => {
    const small = await sharp({ create: { width: 120, height: 90, channels: 3, background: "#3a6" } })
      .jpeg()
      .toBuffer();
    // SOI, then two 40,000-byte COM segments (FF FE, length), then the rest of the file
    const comment = Buffer.alloc(40_000, 0x20);
    comment.writeUInt16BE(0xfffe, 0);
    comment.writeUInt16BE(40_000 - 2, 2);
    const jpeg = Buffer.concat([small.subarray(0, 2), comment, comment, small.subarray(2)]);
    expect((await sharp(jpeg).metadata()).width).toBe(120);
    const stored = await put(jpeg);
    const r = await understanding.image(stored);
    if (!r.ok) throw new Error(r.reason);
    expect(r.value).toMatchObject({ mimeType: "image/jpeg", bytes: jpeg.length });
    expect(r.value.resized).toBeUndefined();
    expect((await bytesOf(r.value)).equals(jpeg)).toBe(true);
  });

  it("a picture whose read failed (the store erred) is asked again after 30 s, not a note for good", async () => {
    const png = await sharp({ create: { width: 20, height: 20, channels: 3, background: "#936" } })
      .png()
      .toBuffer();
    const stored = await put(png);
    const failing = vi.spyOn(store, "read").mockRejectedValueOnce(new Error("EIO: i/o error, read"));
    let now = Date.now();
    const clock = vi.spyOn(Date, "now").mockImplementation(() => now);
    try {
      const first = await understanding.image(stored);
      expect(first).toEqual({ ok: false, reason: expect.stringMatching(/EIO/) });
      now += 29_000;
      expect(await understanding.image(stored)).toBe(first);
      now += 2_000;
      const again = await understanding.image(stored);
      expect(again).toMatchObject({ ok: true, value: { mimeType: "image/png", bytes: png.length } });
      expect(failing).toHaveBeenCalledTimes(2);
    } finally {
      failing.mockRestore();
      clock.mockRestore();
    }
  });

  it("a picture that is not one (an answer about the file, not a failure) stays decided", async () => {
    const stored = await put(Buffer.from("\x89PNG\r\n\x1a\n but not really a png at all"));
    const first = await understanding.image({ ...stored, mimeType: "image/png" });
    expect(first.ok).toBe(false);
    const reads = vi.spyOn(store, "read");
    try {
      const later = Date.now() + 3_600_000;
      const clock = vi.spyOn(Date, "now").mockReturnValue(later);
      expect(await understanding.image({ ...stored, mimeType: "image/png" })).toBe(first);
      clock.mockRestore();
      expect(reads).not.toHaveBeenCalled();
    } finally {
      reads.mockRestore();
    }
  });

  it("a picture over maxSide is resized once; each request gets the same JPEG", async () => {
    const big = await sharp({ create: { width: 900, height: 600, channels: 3, background: "#c63" } })
      .png()
      .toBuffer();
    const stored = await put(big);
    const r = await understanding.image(stored);
    if (!r.ok) throw new Error(r.reason);
    expect(r.value.mimeType).toBe("image/jpeg");
    const first = await bytesOf(r.value);
    expect(first.length).toBe(r.value.bytes);
    const meta = await sharp(first).metadata();
    expect(Math.max(meta.width ?? 0, meta.height ?? 0)).toBe(256);
    expect((await bytesOf(r.value)).equals(first)).toBe(true);
  });
});
