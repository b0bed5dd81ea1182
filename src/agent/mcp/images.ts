import { errorMessage } from "../../errors.js";
import { formatBytes } from "../../media/parts.js";
import type { MediaStore } from "../../media/types.js";
import type { McpImageSink } from "./result.js";

/**
 * Images from MCP tools into the media store (API.md §8.3: "images as media parts"): stored by
 * content (`sha256:<hex>`), typed by their bytes, not by what the server claimed. Anything that
 * cannot be kept (over `media.maxBytes.image`, not an image, a store failure) is a one-line note.
 */
export function mediaImageSink(store: MediaStore, maxBytes: number): McpImageSink {
  return async ({ data, mimeType }, signal) => {
    const what = `[image ${mimeType}, ${formatBytes(data.length)}`;
    if (data.length > maxBytes) return { note: `${what}: too large to keep (media.maxBytes.image)]` };
    try {
      const stored = await store.put(
        (async function* () {
          yield data;
        })(),
        { maxBytes, declaredType: mimeType, signal },
      );
      if (!stored.mimeType.startsWith("image/"))
        return { note: `${what}: the bytes are ${stored.mimeType}, not an image; not shown]` };
      return { type: "image", mediaId: stored.mediaId, mimeType: stored.mimeType, bytes: stored.bytes };
    } catch (err) {
      return { note: `${what}: could not be stored (${errorMessage(err)})]` };
    }
  };
}
