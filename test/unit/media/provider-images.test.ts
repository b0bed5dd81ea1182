import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { picturesBase64, toAnthropicMessages } from "../../../src/agent/providers/anthropic.js";
import { writeBody } from "../../../src/agent/providers/openai-http.js";
import { openAIMessagesParts, toOpenAIMessage } from "../../../src/agent/providers/openai-map.js";
import type { PictureContent } from "../../../src/media/types.js";
import type { ModelImage, ModelMessage } from "../../../src/services/models.js";

/**
 * Pictures in a user message as each provider takes them (API.md §8.1): read as the request is
 * written, never kept in the request JSON a session's next call reuses; refs without content are
 * not sent.
 */

/** A picture's content over `raw`, streamed in chunks of uneven sizes, counting its reads. */
function content(raw: Buffer): PictureContent & { reads: number } {
  const c = {
    bytes: raw.length,
    reads: 0,
    async open() {
      c.reads++;
      return (async function* () {
        for (let at = 0, n = 1; at < raw.length; at += n, n = ((n * 7 + 5) % 70_001) + 1)
          yield raw.subarray(at, at + n);
      })();
    },
  };
  return c;
}

/** All of a content's bytes. */
async function bytesOf(c: PictureContent): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of await c.open()) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * A picture as the fs store reads it: each piece copied into the scratch it was given, 100,001
 * bytes at a time (not whole 3-byte groups: the reader carries bytes over); `given` collects the
 * scratch buffers.
 */
function readIntoScratch(raw: Buffer, given: Buffer[]): PictureContent {
  return {
    bytes: raw.length,
    async open(scratch?: Buffer) {
      if (!scratch) throw new Error("no scratch given");
      given.push(scratch);
      return (async function* () {
        for (let at = 0; at < raw.length; at += 100_001) {
          const n = raw.copy(scratch, 0, at, at + Math.min(100_001, scratch.length));
          yield scratch.subarray(0, n);
        }
      })();
    },
  };
}

function patterned(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + 3) & 255;
  return b;
}

const ABC = Buffer.from("ABC");
const msg: ModelMessage = {
  role: "user",
  content: "what is this\n[image cat.jpg]",
  images: [
    { mediaId: `sha256:${"a".repeat(64)}`, mimeType: "image/jpeg", content: content(ABC) },
    { mediaId: `sha256:${"b".repeat(64)}`, mimeType: "image/png" },
  ],
};

/**
 * What `writeBody` writes, as a socket gets it: each chunk is copied only when the write is done
 * (a tick later), so a buffer reused before its write was done would show here.
 */
async function bodyOf(parts: Parameters<typeof writeBody>[1]): Promise<string> {
  const got: Buffer[] = [];
  const socket = new Writable({
    write(chunk: Buffer, _enc, done) {
      setImmediate(() => {
        got.push(Buffer.from(chunk));
        done();
      });
    },
  });
  await writeBody(socket, parts);
  await new Promise<void>((r) => socket.end(r));
  return Buffer.concat(got).toString("utf8");
}

/** The request's messages as the socket gets them. */
function written(messages: ModelMessage[]): Promise<string> {
  return bodyOf(openAIMessagesParts({ system: "sys", messages }));
}

/** What the messages' JSON must be: the whole array serialised at once, data URLs in place. */
async function reference(messages: ModelMessage[]): Promise<string> {
  const out: unknown[] = [{ role: "system", content: "sys" }];
  for (const m of messages) {
    const images = m.role === "user" ? (m.images ?? []).filter((i) => i.content) : [];
    if (m.role !== "user" || images.length === 0) {
      out.push(toOpenAIMessage(m));
      continue;
    }
    const urls: unknown[] = [];
    for (const i of images)
      urls.push({
        type: "image_url",
        image_url: { url: `data:${i.mimeType};base64,${(await bytesOf(i.content!)).toString("base64")}` },
      });
    out.push({ role: "user", content: [{ type: "text", text: m.content }, ...urls] });
  }
  return JSON.stringify(out);
}

describe("images to providers", () => {
  it("openai: a text part then image_url parts with data URLs; a picture without content is not sent", async () => {
    expect(JSON.parse(await written([msg]))).toEqual([
      { role: "system", content: "sys" },
      {
        role: "user",
        content: [
          { type: "text", text: "what is this\n[image cat.jpg]" },
          { type: "image_url", image_url: { url: "data:image/jpeg;base64,QUJD" } },
        ],
      },
    ]);
    expect(toOpenAIMessage({ role: "user", content: "plain" })).toEqual({ role: "user", content: "plain" });
  });

  it("openai: the request JSON with pictures read in is the whole array serialised; the reused JSON keeps no bytes", async () => {
    const pic = (n: number): ModelImage => ({
      mediaId: `sha256:${String(n).repeat(64)}`,
      mimeType: n % 2 ? "image/png" : "image/jpeg",
      content: content(Buffer.alloc(50_000 + n, n)),
    });
    const messages: ModelMessage[] = [
      { role: "user", content: 'first "one" ☃', images: [pic(1), pic(2)] },
      { role: "assistant", content: "ok" },
      { role: "user", content: "plain" },
      {
        role: "user",
        content: "again",
        images: [pic(3), { mediaId: pic(4).mediaId, mimeType: "image/png" }],
      },
    ];
    expect(await written(messages)).toBe(await reference(messages));
    // the pieces hold each picture's content, not its bytes: no piece is as large as a picture
    const parts = openAIMessagesParts({ system: "sys", messages });
    for (const m of messages)
      for (const img of m.role === "user" ? (m.images ?? []) : [])
        if (img.content) expect(parts).toContain(img.content);
    for (const p of parts) if (Buffer.isBuffer(p)) expect(p.length).toBeLessThan(50_000);
    // the next request reuses the JSON made, adds to it, and reads each picture again
    const first = (messages[0] as { images: ModelImage[] }).images[0]!.content as PictureContent & {
      reads: number;
    };
    const readsBefore = first.reads;
    const more: ModelMessage[] = [...messages, { role: "user", content: "x", images: [pic(5)] }];
    expect(await written(more)).toBe(await reference(more));
    expect(first.reads).toBeGreaterThan(readsBefore);
    // an older line whose pictures were taken out (historyLimit) is serialised again from there
    const cut = [{ role: "user" as const, content: messages[0]!.content }, ...more.slice(1)];
    expect(await written(cut)).toBe(await reference(cut));
  });

  it("a picture's base64 is written in pieces (one buffer, reused once each is written) that join to its base64, at any length", async () => {
    for (const n of [0, 1, 2, 3, 49_151, 49_152, 49_153, 200_000]) {
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i++) b[i] = (i * 131 + 7) & 255;
      expect(await bodyOf([content(b)])).toBe(b.toString("base64"));
    }
  });

  it("a picture is read into a scratch buffer the writer gives (views of it, reused once written), kept for the next request", async () => {
    const raw = patterned(500_001);
    const given: Buffer[] = [];
    const stored = readIntoScratch(raw, given);
    expect(await bodyOf(["[", stored, ",", stored, "]"])).toBe(
      `[${raw.toString("base64")},${raw.toString("base64")}]`,
    );
    expect(await bodyOf([stored])).toBe(raw.toString("base64"));
    expect(given).toHaveLength(3);
    expect(given[1]?.buffer).toBe(given[0]?.buffer);
    expect(given[2]?.buffer).toBe(given[0]?.buffer);
  });

  it("a picture whose read is not the size it said fails the request, naming the sizes", async () => {
    const short: PictureContent = { bytes: 10, open: async () => [Buffer.alloc(9)] };
    await expect(bodyOf([short])).rejects.toThrow(/9 bytes, not 10/);
    const long: PictureContent = { bytes: 10, open: async () => [Buffer.alloc(6), Buffer.alloc(6)] };
    await expect(bodyOf([long])).rejects.toThrow(/more than its 10 bytes/);
  });

  it("a request closed mid-body (a write never called back) ends the writer and closes the picture's stream", async () => {
    let closedStream = false;
    const picture: PictureContent = {
      bytes: 300_000,
      open: async () =>
        (async function* () {
          try {
            for (let i = 0; i < 10; i++) yield Buffer.alloc(30_000, i);
          } finally {
            closedStream = true;
          }
        })(),
    };
    // a request whose socket is gone: writes are queued, never called back, then it is destroyed
    const socket = new Writable({ write() {} });
    const writing = writeBody(socket, ["{", picture, "}"]);
    await new Promise((r) => setImmediate(r));
    socket.destroy();
    await expect(writing).rejects.toThrow(/closed while its body was being written/);
    expect(closedStream).toBe(true);
  });

  it("anthropic: each picture read into one scratch buffer joins to its base64; a read of the wrong size fails", async () => {
    const a = patterned(300_002);
    const b = patterned(7);
    const given: Buffer[] = [];
    const ca = readIntoScratch(a, given);
    const cb = readIntoScratch(b, given);
    const m: ModelMessage = {
      role: "user",
      content: "two",
      images: [
        { mediaId: `sha256:${"c".repeat(64)}`, mimeType: "image/png", content: ca },
        { mediaId: `sha256:${"d".repeat(64)}`, mimeType: "image/png", content: cb },
      ],
    };
    const got = await picturesBase64([m]);
    expect(got.get(ca)).toBe(a.toString("base64"));
    expect(got.get(cb)).toBe(b.toString("base64"));
    expect(given[1]).toBe(given[0]);
    const short: PictureContent = { bytes: 10, open: async () => [Buffer.alloc(9)] };
    await expect(picturesBase64([{ ...m, images: [{ ...m.images![0]!, content: short }] }])).rejects.toThrow(
      /9 bytes, not 10/,
    );
  });

  it("anthropic: a text block then base64 image blocks", async () => {
    expect(toAnthropicMessages([msg], await picturesBase64([msg]))).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "what is this\n[image cat.jpg]" },
          { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "QUJD" } },
        ],
      },
    ]);
  });
});
