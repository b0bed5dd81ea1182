import type { Dialect } from "./render.js";

/** WhatsApp: `*bold*`, `_italic_`, `~strike~`, backtick code; no escaping, links written out. */
export const whatsappText: Dialect = {
  text: (s) => s,
  code: (s) => `\`${s}\``,
  bold: (s) => `*${s}*`,
  italic: (s) => `_${s}_`,
  strike: (s) => `~${s}~`,
  spoiler: (s) => s,
  link: (url, _label, text) => linkText(url, text),
  autolink: (url) => url,
  token: (raw) => raw,
  fence: (_lang, code) => `\`\`\`\n${code}\n\`\`\``,
  heading: (s) => `*${s}*`,
  quote: (lines) => lines.map((l) => `> ${l}`).join("\n"),
  item: (b, s) => `${b.indent}${b.ordered ? b.marker : "•"} ${s}`,
  rule: () => "──────────",
};

/** `label (url)`, or just the url when the label adds nothing. */
export function linkText(url: string, label: string): string {
  const bare = url.replace(/^mailto:/i, "");
  return !label || label === url || label === bare ? url : `${label} (${url})`;
}
