import type { MediaPart } from "../channels/types.js";
import { SwitchboardError } from "../errors.js";
import { defaultName, sanitizeFilename } from "./names.js";
import type { MediaStore, StoredMedia } from "./types.js";

/**
 * Stored files named by `{ mediaId }` (chat.send, sessions_send, the message tool) as the parts
 * of a user line: the kind from the stored (sniffed) type. An unknown or pruned id is an
 * INVALID_PARAMS error naming the field.
 */

export function partOf(stored: StoredMedia, name?: string): MediaPart {
  const base = { mediaId: stored.mediaId, mimeType: stored.mimeType, bytes: stored.bytes };
  const family = stored.mimeType.split("/")[0];
  if (family === "image") return { type: "image", ...base, ...(name ? { name } : {}) };
  if (family === "audio") return { type: "audio", ...base, voice: false, ...(name ? { name } : {}) };
  if (family === "video") return { type: "video", ...base, ...(name ? { name } : {}) };
  return { type: "file", ...base, name: name ?? defaultName("file", stored.mimeType) };
}

export async function resolveAttachments(
  media: MediaStore | undefined,
  attachments: ReadonlyArray<{ mediaId: string; name?: string }>,
  field: string,
): Promise<MediaPart[]> {
  if (attachments.length === 0) return [];
  if (!media) throw new SwitchboardError("NOT_SUPPORTED", `${field}: this process has no media store`);
  const parts: MediaPart[] = [];
  for (const [i, a] of attachments.entries()) {
    const stored = await media.stat(a.mediaId);
    if (!stored)
      throw new SwitchboardError(
        "INVALID_PARAMS",
        `${field}[${i}].mediaId: no stored media ${a.mediaId} (unknown or past retention)`,
        {
          details: { field: `${field}[${i}].mediaId` },
        },
      );
    parts.push(partOf(stored, sanitizeFilename(a.name) ?? undefined));
  }
  return parts;
}
