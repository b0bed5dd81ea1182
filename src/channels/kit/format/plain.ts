import type { Dialect } from "./render.js";
import { linkText } from "./whatsapp.js";

/** No markup at all: what a reader should see, for channels (or fallbacks) without formatting. */
export const plainText: Dialect = {
  text: (s) => s,
  code: (s) => s,
  bold: (s) => s,
  italic: (s) => s,
  strike: (s) => s,
  spoiler: (s) => s,
  link: (url, _label, text) => linkText(url, text),
  autolink: (url) => url,
  token: (raw) => raw,
  fence: (_lang, code) => code,
  heading: (s) => s,
  quote: (lines) => lines.map((l) => `> ${l}`).join("\n"),
  item: (b, s) => `${b.indent}${b.marker} ${s}`,
  rule: () => "----------",
};
