import type { Dialect } from "./render.js";

/**
 * Telegram `parse_mode: "HTML"`: only `& < >` need escaping outside tags (plus `"` inside
 * attributes); supported tags are b, i, s, code, pre, a, tg-spoiler, blockquote.
 */

export function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

const escapeAttr = (s: string): string => escapeHtml(s).replace(/"/g, "&quot;");

/** Schemes Telegram accepts in `<a href>`; anything else is shown as text. */
const LINKABLE = /^(https?:|tg:|mailto:)/i;

export const telegramHtml: Dialect = {
  text: escapeHtml,
  code: (s) => `<code>${escapeHtml(s)}</code>`,
  bold: (s) => `<b>${s}</b>`,
  italic: (s) => `<i>${s}</i>`,
  strike: (s) => `<s>${s}</s>`,
  spoiler: (s) => `<tg-spoiler>${s}</tg-spoiler>`,
  link: (url, inner) => {
    if (!LINKABLE.test(url)) return `${inner} (${escapeHtml(url)})`;
    return `<a href="${escapeAttr(url)}">${inner}</a>`;
  },
  autolink: (url) =>
    LINKABLE.test(url) ? `<a href="${escapeAttr(url)}">${escapeHtml(url)}</a>` : escapeHtml(url),
  token: escapeHtml,
  fence: (lang, code) => {
    const safe = lang.replace(/[^\w+#.-]/g, "");
    const open = safe ? `<code class="language-${safe}">` : "<code>";
    return `<pre>${open}${escapeHtml(code)}</code></pre>`;
  },
  heading: (s) => `<b>${s}</b>`,
  quote: (lines) => `<blockquote>${lines.join("\n")}</blockquote>`,
  item: (b, s) => `${b.indent}${b.ordered ? b.marker : "•"} ${s}`,
  rule: () => "──────────",
};

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'", apos: "'" };

/**
 * Telegram HTML back to the text a reader would see: tags dropped, entities decoded, link
 * targets kept after the label. Used when Telegram rejects the markup and we resend plain.
 */
export function telegramHtmlToPlain(html: string): string {
  return html
    .replace(/<a\s+href="([^"]*)"\s*>([\s\S]*?)<\/a>/gi, (_m, href: string, label: string) => {
      const text = label.replace(/<[^>]*>/g, "");
      return decodeEntities(text) === decodeEntities(href) ? text : `${text} (${href})`;
    })
    .replace(/<\/?[a-z][a-z0-9-]*(?:\s[^<>]*)?>/gi, "")
    .replace(/&(amp|lt|gt|quot|#39|apos);/g, (_m, e: string) => ENTITIES[e] ?? "");
}

function decodeEntities(s: string): string {
  return s.replace(/&(amp|lt|gt|quot|#39|apos);/g, (_m, e: string) => ENTITIES[e] ?? "");
}
