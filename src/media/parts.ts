import { z } from "zod";
import { type MediaPart, mediaPartSchema } from "../channels/types.js";

/**
 * A user line's content with media (API.md §8.1): `[{ type: "text", text }, ...parts]`, ids and
 * metadata only. Turns carry the parts in their request's `meta.parts` (both pipeline drivers
 * keep `meta` per collected message); the runtime writes them into the line.
 */

export type TextPart = { type: "text"; text: string };
export type UserPart = TextPart | MediaPart;

const partsSchema = z.array(mediaPartSchema).max(100);

/** The validated parts of a turn message's `meta`, or [] (anything malformed is not trusted). */
export function partsFromMeta(meta: Record<string, unknown> | undefined): MediaPart[] {
  if (!meta || meta.parts === undefined) return [];
  const r = partsSchema.safeParse(meta.parts);
  return r.success ? r.data : [];
}

/** The line's content: the text alone without parts, else the array of parts. */
export function userContent(text: string, parts: readonly MediaPart[]): string | UserPart[] {
  return parts.length === 0 ? text : [{ type: "text", text }, ...parts];
}

/** The media parts of a stored user line's content (validated), or []. */
export function mediaPartsOf(content: unknown): MediaPart[] {
  if (!Array.isArray(content)) return [];
  const out: MediaPart[] = [];
  for (const p of content) {
    if (p && typeof p === "object" && (p as { type?: unknown }).type !== "text") {
      const r = mediaPartSchema.safeParse(p);
      if (r.success) out.push(r.data);
    }
  }
  return out;
}

/** The text parts of a content array, joined; the string itself for a string. */
export function textOfParts(content: unknown): string | null {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return null;
  const texts: string[] = [];
  for (const p of content)
    if (
      p &&
      typeof p === "object" &&
      (p as TextPart).type === "text" &&
      typeof (p as TextPart).text === "string"
    )
      texts.push((p as TextPart).text);
  return texts.join("\n");
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}

export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

const REASONS: Record<Extract<MediaPart, { type: "media_note" }>["reason"], string> = {
  too_large: "too large to take",
  unsupported: "of a type that cannot be read",
  download_failed: "could not be downloaded",
  transcription_failed: "could not be transcribed",
  extraction_failed: "could not be read",
};

/** The one line the model sees for a part nothing better is known for (no understanding ran). */
export function noteLine(p: MediaPart): string {
  const size = "bytes" in p && typeof p.bytes === "number" ? `, ${formatBytes(p.bytes)}` : "";
  const name = p.name ? ` ${p.name}` : "";
  switch (p.type) {
    case "media_note":
      return `[attachment${name}${p.mimeType ? ` (${p.mimeType}${size})` : size ? ` (${size.slice(2)})` : ""} ${REASONS[p.reason]}]`;
    case "image":
      return `[image${name} (${p.mimeType}${size})]`;
    case "audio":
      return `[${p.voice ? "voice note" : "audio"}${p.durationSeconds !== undefined ? ` ${formatDuration(p.durationSeconds)}` : ""}${name} (${p.mimeType}${size})]${p.transcript ? ` ${p.transcript}` : ""}`;
    case "video":
      return `[video${name}${p.durationSeconds !== undefined ? ` ${formatDuration(p.durationSeconds)}` : ""} (${p.mimeType}${size})]`;
    case "file":
      return `[file ${p.name} (${p.mimeType}${size})]`;
  }
}
