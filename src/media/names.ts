/**
 * A file name as the sender gave it, made safe to show and to store as metadata: no directory
 * part (`../`, `C:\`), no control or bidi-override characters (a `gpj.exe` shown as `exe.jpg`),
 * no leading dots, at most 200 characters. Null when nothing usable is left.
 */

// C0/C1 controls, bidi embeddings/overrides/isolates, marks, zero-width and BOM.
// biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;
const MAX_NAME = 200;

export function sanitizeFilename(name: string | undefined): string | null {
  if (!name) return null;
  let s = name.normalize("NFC").replace(UNSAFE, "");
  // Only the last path component, whichever separator the sender's system used.
  s = s.split(/[/\\]/).pop() ?? "";
  s = s
    .replace(/^[.\s]+/, "")
    .replace(/[\s.]+$/, "")
    .replace(/[<>:"|?*]/g, "_");
  if (s.length > MAX_NAME) {
    const ext = /\.[A-Za-z0-9]{1,10}$/.exec(s)?.[0] ?? "";
    s = s.slice(0, MAX_NAME - ext.length) + ext;
  }
  return s === "" ? null : s;
}

const EXT_BY_TYPE: Record<string, string> = {
  "image/jpeg": "jpg",
  "image/png": "png",
  "image/gif": "gif",
  "image/webp": "webp",
  "audio/ogg": "ogg",
  "audio/opus": "ogg",
  "audio/mpeg": "mp3",
  "audio/mp4": "m4a",
  "audio/x-m4a": "m4a",
  "audio/wav": "wav",
  "video/mp4": "mp4",
  "video/webm": "webm",
  "video/quicktime": "mov",
  "application/pdf": "pdf",
  "text/plain": "txt",
  "text/markdown": "md",
  "text/csv": "csv",
  "application/json": "json",
};

/** A name for a file that came without one: `<kind>.<ext>`. */
export function defaultName(kind: string, mimeType: string): string {
  const ext = EXT_BY_TYPE[mimeType] ?? /\/([a-z0-9]{1,8})$/.exec(mimeType)?.[1] ?? "bin";
  return `${kind}.${ext}`;
}
