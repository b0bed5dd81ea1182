/**
 * The real type of a stored file, from its bytes (`file-type`): a type that lies about itself is
 * recorded as what it is. Text (plain, Markdown, CSV, JSON) has no magic bytes: it is named from
 * the declared type or the extension, and only when the head is valid UTF-8 without NUL bytes.
 * `file-type` is imported on the first file (start-up does not pay for it).
 */

const TEXT_BY_EXT: Record<string, string> = {
  txt: "text/plain",
  text: "text/plain",
  log: "text/plain",
  md: "text/markdown",
  markdown: "text/markdown",
  csv: "text/csv",
  tsv: "text/tab-separated-values",
  json: "application/json",
};

const TEXT_TYPES = new Set(Object.values(TEXT_BY_EXT));

export function isTextType(mimeType: string): boolean {
  return TEXT_TYPES.has(mimeType) || mimeType.startsWith("text/");
}

function looksLikeText(head: Uint8Array): boolean {
  if (head.includes(0)) return false;
  try {
    // A multi-byte character cut at the end of the head is fine: drop up to 3 trailing bytes.
    new TextDecoder("utf-8", { fatal: true }).decode(head.subarray(0, Math.max(0, head.length - 3)));
    return true;
  } catch {
    return false;
  }
}

export function extensionOf(name: string | undefined): string {
  const m = /\.([a-z0-9]{1,10})$/i.exec(name ?? "");
  return m?.[1]?.toLowerCase() ?? "";
}

export async function sniffType(
  file: string,
  head: Uint8Array,
  declared: string | undefined,
  name: string | undefined,
): Promise<string> {
  const { fileTypeFromFile } = await import("file-type");
  const found = await fileTypeFromFile(file).catch(() => undefined);
  if (found) return found.mime;
  if (!looksLikeText(head)) return "application/octet-stream";
  const claimed = declared?.split(";")[0]?.trim().toLowerCase();
  if (claimed && isTextType(claimed)) return claimed;
  return TEXT_BY_EXT[extensionOf(name)] ?? "text/plain";
}
