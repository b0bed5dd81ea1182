import { z } from "zod";
import type { MediaPart } from "../../channels/types.js";
import { formatBytes } from "../../media/parts.js";
import type { ToolResult } from "../../tools/types.js";

/**
 * An MCP tool result → what the model gets (API.md §8.3): text as text, images into the media store
 * as media parts (a one-line note when there is no store), embedded resources as text, anything
 * else as a one-line note. The whole text is capped at the server's `maxResultChars`; a cut says
 * where it was made and how much there was. What the server sent is validated here (zod) before
 * any of it is used, even though the SDK has parsed it already: this is the shape we rely on.
 */

const textItem = z.object({ type: z.literal("text"), text: z.string() });
const binaryItem = z.object({
  type: z.enum(["image", "audio"]),
  data: z.base64(),
  mimeType: z.string().min(1).max(200),
});
const resourceItem = z.object({
  type: z.literal("resource"),
  resource: z.union([
    z.object({ uri: z.string(), mimeType: z.string().max(200).optional(), text: z.string() }),
    z.object({ uri: z.string(), mimeType: z.string().max(200).optional(), blob: z.base64() }),
  ]),
});
const linkItem = z.object({
  type: z.literal("resource_link"),
  uri: z.string(),
  name: z.string().optional(),
  mimeType: z.string().max(200).optional(),
});
const otherItem = z.object({ type: z.string().min(1).max(100) });

export const callToolResultSchema = z.object({
  content: z.array(z.unknown()).max(1000).default([]),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  isError: z.boolean().optional(),
});

export type ImagePart = Extract<MediaPart, { type: "image" }>;

/**
 * Where an image from a tool goes: the media store (src/media), wired in by the app. Returns the
 * stored image's part, or a one-line note when it could not be kept (too large, not an image).
 */
export type McpImageSink = (
  image: { data: Buffer; mimeType: string },
  signal: AbortSignal,
) => Promise<ImagePart | { note: string }>;

export interface MapOptions {
  maxResultChars: number;
  /** Absent: the model gets a one-line note with the image's type and size. */
  images?: McpImageSink;
  signal: AbortSignal;
}

function base64Bytes(b64: string): number {
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return Math.floor((b64.length * 3) / 4) - pad;
}

/** `{ status: "ok", text, parts? }`, or `{ status: "error", error }` for an `isError` result. */
export async function mapToolResult(raw: unknown, opts: MapOptions): Promise<ToolResult> {
  const parsed = callToolResultSchema.safeParse(raw);
  if (!parsed.success) {
    return {
      status: "error",
      error: `the server's result is not a tool result (${parsed.error.issues[0]?.message})`,
    };
  }
  const result = parsed.data;
  const texts: string[] = [];
  const parts: ImagePart[] = [];
  for (const [i, item] of result.content.entries()) {
    const text = textItem.safeParse(item);
    if (text.success) {
      texts.push(text.data.text);
      continue;
    }
    const bin = binaryItem.safeParse(item);
    if (bin.success) {
      const { type, mimeType, data } = bin.data;
      if (type === "image" && opts.images) {
        const stored = await opts.images({ data: Buffer.from(data, "base64"), mimeType }, opts.signal);
        if ("note" in stored) texts.push(stored.note);
        else {
          parts.push(stored);
          texts.push(`[image ${stored.mimeType}, ${formatBytes(stored.bytes)}: ${stored.mediaId}]`);
        }
      } else {
        texts.push(`[${type} ${mimeType}, ${formatBytes(base64Bytes(data))}: not shown]`);
      }
      continue;
    }
    const res = resourceItem.safeParse(item);
    if (res.success) {
      const r = res.data.resource;
      const type = r.mimeType ? ` (${r.mimeType})` : "";
      if ("text" in r) texts.push(`[resource ${r.uri}${type}]\n${r.text}`);
      else
        texts.push(
          `[resource ${r.uri}${type}, ${formatBytes(base64Bytes(r.blob))} of binary data: not shown]`,
        );
      continue;
    }
    const link = linkItem.safeParse(item);
    if (link.success) {
      const l = link.data;
      texts.push(
        `[resource link ${l.uri}${l.name ? ` "${l.name}"` : ""}${l.mimeType ? ` (${l.mimeType})` : ""}]`,
      );
      continue;
    }
    const other = otherItem.safeParse(item);
    texts.push(
      other.success
        ? `[content item ${i} of type "${other.data.type}" is malformed or not supported]`
        : `[content item ${i} is malformed]`,
    );
  }
  if (texts.length === 0 && result.structuredContent) texts.push(JSON.stringify(result.structuredContent));
  const { text, truncated } = capText(texts.join("\n"), opts.maxResultChars);
  if (result.isError) return { status: "error", error: text || "the tool reported an error", ...truncated };
  return { status: "ok", text, ...(parts.length > 0 ? { parts } : {}), ...truncated };
}

/** At most `max` characters; a cut text ends with a line saying so. */
export function capText(text: string, max: number): { text: string; truncated: { truncated?: true } } {
  if (text.length <= max) return { text, truncated: {} };
  const note = `\n[truncated: the result had ${text.length} characters; the first ${max} are shown]`;
  return { text: text.slice(0, max) + note, truncated: { truncated: true } };
}
