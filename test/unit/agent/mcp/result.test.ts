import { describe, expect, it } from "vitest";
import { mediaImageSink } from "../../../../src/agent/mcp/images.js";
import { capText, mapToolResult } from "../../../../src/agent/mcp/result.js";
import type { MediaStore } from "../../../../src/media/types.js";

const signal = new AbortController().signal;
const map = (raw: unknown, extra = {}) => mapToolResult(raw, { maxResultChars: 1000, signal, ...extra });
const png = Buffer.from("89504e470d0a1a0a", "hex").toString("base64");

describe("an MCP tool result as the model gets it", () => {
  it("every kind of content item becomes text or a one-line note; nothing is dropped silently", async () => {
    const r = await map({
      content: [
        { type: "text", text: "hello" },
        { type: "image", data: png, mimeType: "image/png" },
        { type: "audio", data: png, mimeType: "audio/ogg" },
        { type: "resource", resource: { uri: "file:///a.bin", mimeType: "application/zip", blob: png } },
        { type: "resource_link", uri: "file:///b.txt", name: "b", mimeType: "text/plain" },
        { type: "video", url: "x" },
        { type: "image", data: "%%%not base64%%%", mimeType: "image/png" },
        42,
      ],
    });
    expect(r).toEqual({
      status: "ok",
      text: [
        "hello",
        "[image image/png, 8 B: not shown]",
        "[audio audio/ogg, 8 B: not shown]",
        "[resource file:///a.bin (application/zip), 8 B of binary data: not shown]",
        '[resource link file:///b.txt "b" (text/plain)]',
        '[content item 5 of type "video" is malformed or not supported]',
        '[content item 6 of type "image" is malformed or not supported]',
        "[content item 7 is malformed]",
      ].join("\n"),
    });
  });

  it("structuredContent alone is shown as JSON; isError is a tool error; a non-result is an error", async () => {
    expect(await map({ content: [], structuredContent: { n: 1 } })).toEqual({
      status: "ok",
      text: '{"n":1}',
    });
    expect(await map({ content: [{ type: "text", text: "boom" }], isError: true })).toEqual({
      status: "error",
      error: "boom",
    });
    expect((await map({ content: "nope" })).status).toBe("error");
  });

  it("a long text is cut at maxResultChars and says so", () => {
    const { text, truncated } = capText("x".repeat(1500), 1000);
    expect(truncated).toEqual({ truncated: true });
    expect(text).toBe(
      `${"x".repeat(1000)}\n[truncated: the result had 1500 characters; the first 1000 are shown]`,
    );
  });

  it("an image whose bytes are not an image, or too large, is a note, not a part", async () => {
    const store = {
      put: async () => ({
        mediaId: `sha256:${"a".repeat(64)}`,
        mimeType: "text/plain",
        bytes: 8,
        storedAt: 0,
      }),
    } as unknown as MediaStore;
    const r = await map(
      { content: [{ type: "image", data: png, mimeType: "image/png" }] },
      { images: mediaImageSink(store, 1024) },
    );
    expect(r).toEqual({
      status: "ok",
      text: "[image image/png, 8 B: the bytes are text/plain, not an image; not shown]",
    });
    const small = await map(
      { content: [{ type: "image", data: png, mimeType: "image/png" }] },
      { images: mediaImageSink(store, 4) },
    );
    expect(small.text).toBe("[image image/png, 8 B: too large to keep (media.maxBytes.image)]");
  });
});
