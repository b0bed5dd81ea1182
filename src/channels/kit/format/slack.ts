import type { Dialect } from "./render.js";

/**
 * Slack mrkdwn: `*bold*`, `_italic_`, `~strike~`, `<url|label>`. `& < >` are escaped
 * everywhere except inside Slack's own tokens (`<@U123>`, `<#C123>`, `<!here>`), which pass
 * through so mentions keep working.
 */

export function escapeSlack(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Link labels cannot carry formatting, and `|` / `>` would end the token early. */
const escapeLabel = (s: string): string => escapeSlack(s).replace(/\|/g, "¦");
const escapeUrl = (s: string): string => s.replace(/\|/g, "%7C").replace(/>/g, "%3E").replace(/</g, "%3C");

export const slackMrkdwn: Dialect = {
  text: escapeSlack,
  code: (s) => `\`${escapeSlack(s)}\``,
  bold: (s) => `*${s}*`,
  italic: (s) => `_${s}_`,
  strike: (s) => `~${s}~`,
  spoiler: (s) => s,
  link: (url, _label, text) => {
    return text && text !== url ? `<${escapeUrl(url)}|${escapeLabel(text)}>` : `<${escapeUrl(url)}>`;
  },
  autolink: (url) => `<${escapeUrl(url)}>`,
  token: (raw) => raw,
  fence: (_lang, code) => `\`\`\`\n${escapeSlack(code)}\n\`\`\``,
  heading: (s) => `*${s}*`,
  quote: (lines) => lines.map((l) => `> ${l}`).join("\n"),
  item: (b, s) => `${b.indent}${b.ordered ? b.marker : "•"} ${s}`,
  rule: () => "──────────",
};
