import { describe, expect, it } from "vitest";
import { toAnthropicMessages } from "../../../src/agent/providers/anthropic.js";
import { toOpenAIMessage } from "../../../src/agent/providers/openai-map.js";
import type { ModelMessage } from "../../../src/services/models.js";

/** Pictures in a user message as each provider takes them (API.md §8.1); refs without data are not sent. */

const msg: ModelMessage = {
  role: "user",
  content: "what is this\n[image cat.jpg]",
  images: [
    { mediaId: `sha256:${"a".repeat(64)}`, mimeType: "image/jpeg", data: "QUJD" },
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
