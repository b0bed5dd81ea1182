import { formatDuration, mediaPartsOf, noteLine, textOfParts } from "./parts.js";
import { cachedDocumentText } from "./understand.js";

/**
 * What the model reads of a user line with media (API.md §8.1), built synchronously with the
 * prompt: the text, then per part a line — `[voice note 0:12] <transcript>`, `[file report.pdf]
 * <extracted text>`, `[image cat.jpg]` (its bytes join the message at call time, for vision
 * models only), and a one-line note for video, unreadable files and what could not be taken.
 */

export interface ImageRef {
  mediaId: string;
  mimeType: string;
  name?: string;
}

export function renderUserParts(content: readonly unknown[]): { text: string; images: ImageRef[] } {
  const lines: string[] = [];
  const text = textOfParts(content) ?? "";
  if (text !== "") lines.push(text);
  const images: ImageRef[] = [];
  for (const p of mediaPartsOf(content)) {
    if (p.type === "image") {
      images.push({ mediaId: p.mediaId, mimeType: p.mimeType, ...(p.name ? { name: p.name } : {}) });
      lines.push(`[image${p.name ? ` ${p.name}` : ""}]`);
    } else if (p.type === "audio" && p.transcript !== undefined) {
      const len = p.durationSeconds !== undefined ? ` ${formatDuration(p.durationSeconds)}` : "";
      lines.push(`[${p.voice ? "voice note" : `audio${p.name ? ` ${p.name}` : ""}`}${len}] ${p.transcript}`);
    } else if (p.type === "file" && p.extracted) {
      const doc = cachedDocumentText(p.mediaId);
      lines.push(doc !== undefined ? `[file ${p.name}] ${doc}` : noteLine(p));
    } else lines.push(noteLine(p));
  }
  return { text: lines.join("\n"), images };
}
