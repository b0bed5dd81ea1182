import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import { afterAll, describe, expect, it } from "vitest";
import type { InboundAttachment } from "../../../src/channels/types.js";
import { mediaPartSchema } from "../../../src/channels/types.js";
import { silentLogger } from "../../../src/log.js";
import { FsMediaStore } from "../../../src/media/fs/store.js";
import { sanitizeFilename } from "../../../src/media/names.js";
import { StoreMediaSink } from "../../../src/media/sink.js";

/** The media sink (API.md §8.1): caps before and during the download, stalls, sniffing, names. */

const root = mkdtempSync(path.join(os.tmpdir(), "sb-sink-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const dir = path.join(root, "media");
const store = new FsMediaStore(dir, 24 * 3600_000);
const maxBytes = { image: 1000, audio: 2000, video: 3000, file: 1500 };
const sink = new StoreMediaSink(store, { maxBytes }, silentLogger(), {
  stallMs: 150,
  channelMaxBytes: (c) => (c === "tiny" ? 100 : undefined),
});
const opts = { channel: "telegram", accountId: "default", maxBytes: 10_000 };
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5d8b6d10000000049454e44ae426082",
  "hex",
);
const PDF = Buffer.from("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n");

function att(bytes: Buffer, over: Partial<InboundAttachment> = {}): InboundAttachment & { opened: number } {
  const a = {
    kind: "image" as const,
    opened: 0,
    async open() {
      a.opened++;
      return (async function* () {
        yield bytes;
      })();
    },
    ...over,
  };
  return a;
}

describe("media sink", () => {
  it("stores each attachment as a part with its sniffed type, in order", async () => {
    const parts = await sink.take(
      [
        att(PNG, { mimeType: "image/jpeg", name: "cat.jpg", width: 1, height: 1 }),
        att(Buffer.from("hello"), { kind: "audio", voice: true, durationSeconds: 12, mimeType: "audio/ogg" }),
        att(Buffer.from("# notes\n"), { kind: "file", name: "notes.md" }),
      ],
      opts,
    );
    for (const p of parts) expect(mediaPartSchema.safeParse(p).success).toBe(true);
    expect(parts[0]).toMatchObject({
      type: "image",
      mimeType: "image/png",
      bytes: PNG.length,
      name: "cat.jpg",
    });
    // Not audio by its bytes: recorded as what it is, a file (never dropped).
    expect(parts[1]).toMatchObject({ type: "file", mimeType: "text/plain" });
    expect(parts[2]).toMatchObject({ type: "file", mimeType: "text/markdown", name: "notes.md" });
  });

  it("a photo that is really a PDF is recorded as a PDF file", async () => {
    const [p] = await sink.take([att(PDF, { mimeType: "image/jpeg", name: "photo.jpg" })], opts);
    expect(p).toMatchObject({ type: "file", mimeType: "application/pdf", name: "photo.jpg" });
  });

  it("a declared size over the kind's maxBytes or the channel's mediaMaxMb fetches nothing", async () => {
    const big = att(PNG, { bytes: 5000 });
    const [p] = await sink.take([big], opts);
    expect(p).toMatchObject({ type: "media_note", reason: "too_large", bytes: 5000 });
    expect(big.opened).toBe(0);
    const small = att(PNG, { bytes: 200 });
    const [q] = await sink.take([small], { ...opts, channel: "tiny" });
    expect(q).toMatchObject({ type: "media_note", reason: "too_large" });
    expect(small.opened).toBe(0);
    const [r] = await sink.take([att(PNG, { bytes: 200 })], { ...opts, maxBytes: 0.5 * 200 });
    expect(r).toMatchObject({ reason: "too_large" });
  });

  it("an undeclared size is aborted past the cap, and nothing is kept", async () => {
    let signal: AbortSignal | undefined;
    const a: InboundAttachment = {
      kind: "image",
      async open(s) {
        signal = s;
        return (async function* () {
          for (let i = 0; i < 100; i++) yield Buffer.alloc(100, i);
        })();
      },
    };
    const [p] = await sink.take([a], opts);
    expect(p).toMatchObject({ type: "media_note", reason: "too_large" });
    expect(signal?.aborted).toBe(true);
    expect(readdirSync(dir).filter((f) => f.startsWith(".tmp-"))).toEqual([]);
  });

  it("a stalled download ends in bounded time as download_failed; a failing one too", async () => {
    const stalled: InboundAttachment = {
      kind: "video",
      async open() {
        return (async function* () {
          yield Buffer.from("start");
          await new Promise(() => undefined); // never sends again
        })();
      },
    };
    const hanging: InboundAttachment = { kind: "file", open: () => new Promise(() => undefined) };
    const failing: InboundAttachment = {
      kind: "file",
      name: "x.pdf",
      open: async () => {
        throw new Error("HTTP 404");
      },
    };
    const t0 = Date.now();
    const parts = await sink.take([stalled, hanging, failing], opts);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(parts.map((p) => p.type === "media_note" && p.reason)).toEqual([
      "download_failed",
      "download_failed",
      "download_failed",
    ]);
    expect(parts[2]).toMatchObject({ name: "x.pdf" });
  });

  it("a chunk already stored is not held until the download ends (a long download streams, not buffers)", async () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    const big = new StoreMediaSink(
      store,
      { maxBytes: { ...maxBytes, video: 64 * 64 * 1024 } },
      silentLogger(),
    );
    const refs: Array<WeakRef<Buffer>> = [];
    let heldAtChunk40 = -1;
    const a: InboundAttachment = {
      kind: "video",
      async open() {
        return (async function* () {
          for (let i = 0; i < 48; i++) {
            if (i === 40) {
              await new Promise((r) => setImmediate(r)); // the WeakRefs' own hold ends with its job
              gc();
              heldAtChunk40 = refs.slice(0, 36).filter((r) => r.deref() !== undefined).length;
            }
            const chunk = Buffer.alloc(64 * 1024, i);
            refs.push(new WeakRef(chunk));
            yield chunk;
          }
        })();
      },
    };
    const [p] = await big.take([a], { ...opts, maxBytes: 64 * 64 * 1024 });
    expect(p).toMatchObject({ bytes: 48 * 64 * 1024 });
    // Racing each chunk against one long-lived abort promise kept all 36 alive (a 49 MiB video
    // raised the gateway's RSS by ~45 MB); each is garbage once written.
    expect(heldAtChunk40).toBe(0);
  });
});

describe("sanitizeFilename", () => {
  it("drops path tricks, controls and bidi overrides", () => {
    expect(sanitizeFilename("../../etc/passwd")).toBe("passwd");
    expect(sanitizeFilename("C:\\Users\\x\\evil.exe")).toBe("evil.exe");
    expect(sanitizeFilename("invoice\u202Egpj.exe")).toBe("invoicegpj.exe");
    expect(sanitizeFilename("a\u0000b\nc.txt")).toBe("abc.txt");
    expect(sanitizeFilename("..")).toBeNull();
    expect(sanitizeFilename(".bashrc")).toBe("bashrc");
    expect(sanitizeFilename(`${"a".repeat(300)}.pdf`)?.length).toBe(200);
  });
});
