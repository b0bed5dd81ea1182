import { describe, expect, it } from "vitest";
import { toAnthropicMessages } from "../../../src/agent/providers/anthropic.js";
import { openAIMessagesParts, toOpenAIMessage } from "../../../src/agent/providers/openai-map.js";
import { base64Bytes } from "../../../src/media/understand.js";
import type { ModelMessage } from "../../../src/services/models.js";

/** Pictures in a user message as each provider takes them (API.md §8.1); refs without data are not sent. */

const msg: ModelMessage = {
  role: "user",
  content: "what is this\n[image cat.jpg]",
  images: [
    { mediaId: `sha256:${"a".repeat(64)}`, mimeType: "image/jpeg", data: Buffer.from("QUJD") },
    { mediaId: `sha256:${"b".repeat(64)}`, mimeType: "image/png" },
  ],
};

describe("images to providers", () => {
  it("openai: a text part then image_url parts with data URLs", () => {
    expect(toOpenAIMessage(msg)).toEqual({
      role: "user",
      content: [
        { type: "text", text: "what is this\n[image cat.jpg]" },
        { type: "image_url", image_url: { url: "data:image/jpeg;base64,QUJD" } },
      ],
    });
    expect(toOpenAIMessage({ role: "user", content: "plain" })).toEqual({ role: "user", content: "plain" });
  });

  it("openai: the request JSON with pictures spliced in as bytes is the whole array serialised", () => {
    const pic = (n: number) => ({
      mediaId: `sha256:${String(n).repeat(64)}`,
      mimeType: n % 2 ? "image/png" : "image/jpeg",
      data: base64Bytes(Buffer.alloc(50_000 + n, n)),
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
    const reference = (ms: ModelMessage[]) =>
      JSON.stringify([{ role: "system", content: "sys" }, ...ms.map(toOpenAIMessage)]);
    const body = (ms: ModelMessage[]) =>
      Buffer.concat(openAIMessagesParts({ system: "sys", messages: ms })).toString("utf8");
    expect(body(messages)).toBe(reference(messages));
    // each picture goes out as the buffer the image cache holds, not a copy
    const parts = openAIMessagesParts({ system: "sys", messages });
    for (const m of messages)
      for (const img of m.role === "user" ? (m.images ?? []) : [])
        if (img.data) expect(parts).toContain(img.data);
    // the next request reuses the JSON made, and adds to it
    const more: ModelMessage[] = [...messages, { role: "user", content: "x", images: [pic(5)] }];
    expect(body(more)).toBe(reference(more));
    // an older line whose pictures were taken out (historyLimit) is serialised again from there
    const cut = [{ role: "user" as const, content: messages[0]!.content }, ...more.slice(1)];
    expect(body(cut)).toBe(reference(cut));
  });

  it("base64Bytes is the buffer's base64, at any length", () => {
    for (const n of [0, 1, 2, 3, 49_151, 49_152, 49_153, 200_000]) {
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i++) b[i] = (i * 131 + 7) & 255;
      expect(base64Bytes(b).toString("latin1")).toBe(b.toString("base64"));
    }
  });

  it("anthropic: a text block then base64 image blocks", () => {
    expect(toAnthropicMessages([msg])).toEqual([
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
