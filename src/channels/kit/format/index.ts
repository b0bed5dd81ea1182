import type { ChannelCapabilities } from "../../types.js";
import { lexMarkdown } from "./lex.js";
import { plainText } from "./plain.js";
import { type Dialect, renderTokens } from "./render.js";
import { slackMrkdwn } from "./slack.js";
import { telegramHtml } from "./telegram.js";
import { whatsappText } from "./whatsapp.js";

/**
 * Markdown (what models write) → one channel's dialect, rendered from marked's tokens (lex.ts).
 * Pure and total: unknown or broken markup degrades to literal text, never to an exception. Render each chunk separately
 * (`chunkText` first) so a tag never spans two messages.
 */

export type MarkdownDialect = ChannelCapabilities["markdown"];

const DIALECTS: Record<Exclude<MarkdownDialect, "discord" | "markdown">, Dialect> = {
  "telegram-html": telegramHtml,
  "slack-mrkdwn": slackMrkdwn,
  whatsapp: whatsappText,
  plain: plainText,
};

export function renderMarkdown(md: string, dialect: MarkdownDialect): string {
  // Discord renders Markdown itself; only line endings are normalised.
  // Discord and the web chat (which renders and sanitises in the browser) take Markdown as is.
  if (dialect === "discord" || dialect === "markdown") return md.replace(/\r\n?/g, "\n");
  return renderTokens(lexMarkdown(md), DIALECTS[dialect]);
}

export { escapeSlack } from "./slack.js";
export { escapeHtml, telegramHtmlToPlain } from "./telegram.js";
