import { Marked, type TokenizerExtension, type TokenizerThis, type Tokens } from "marked";

/**
 * Markdown is read by `marked` (GFM), the same parser the web chat renders with, so every
 * platform and the browser agree on what a reply means. Two inline constructs marked does not
 * know are added as tokenizer extensions: Telegram-style `||spoilers||`, and Slack's own tokens
 * (`<@U123>`, `<#C123|general>`, `<!here>`), kept verbatim so mentions keep working.
 */

/** `||hidden||`: not opened before a space nor closed after one, like the other emphasis. */
const spoiler: TokenizerExtension = {
  name: "spoiler",
  level: "inline",
  start: (src) => {
    const i = src.indexOf("||");
    return i < 0 ? undefined : i;
  },
  tokenizer(this: TokenizerThis, src: string): Tokens.Generic | undefined {
    const m = /^\|\|(?=\S)([\s\S]*?\S)\|\|/.exec(src);
    if (!m) return undefined;
    return { type: "spoiler", raw: m[0], tokens: this.lexer.inlineTokens(m[1] ?? "") };
  },
  childTokens: ["tokens"],
};

/** A Slack token: `<@…>`, `<#…>` or `<!…>` without spaces. */
const slackToken: TokenizerExtension = {
  name: "platformToken",
  level: "inline",
  start: (src) => {
    const i = src.search(/<[@#!]/);
    return i < 0 ? undefined : i;
  },
  tokenizer(src: string): Tokens.Generic | undefined {
    const m = /^<[@#!][^\s<>]*>/.exec(src);
    return m ? { type: "platformToken", raw: m[0] } : undefined;
  },
};

const markdown = new Marked({ gfm: true, extensions: [spoiler, slackToken] });

/** The block tokens of a Markdown text (never throws: marked reads any text). */
export function lexMarkdown(md: string): Tokens.Generic[] {
  return markdown.lexer(md) as unknown as Tokens.Generic[];
}
