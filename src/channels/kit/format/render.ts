import type { Block, Inline } from "./parse.js";

/**
 * A dialect says how to write each node; `renderBlocks` does the walking, so every dialect
 * handles the same constructs and differs only in syntax.
 */
export interface Dialect {
  text(s: string): string;
  code(s: string): string;
  bold(inner: string): string;
  italic(inner: string): string;
  strike(inner: string): string;
  spoiler(inner: string): string;
  link(url: string, label: Inline[], renderLabel: (nodes: Inline[]) => string): string;
  autolink(url: string): string;
  token(raw: string): string;
  fence(lang: string, code: string): string;
  heading(inner: string): string;
  /** Consecutive quote lines, already rendered. */
  quote(lines: string[]): string;
  item(block: Extract<Block, { kind: "item" }>, inner: string): string;
  rule(): string;
}

export function renderInline(nodes: Inline[], d: Dialect): string {
  const self = (ns: Inline[]): string => renderInline(ns, d);
  return nodes.map((n) => renderNode(n, d, self)).join("");
}

function renderNode(n: Inline, d: Dialect, self: (ns: Inline[]) => string): string {
  switch (n.kind) {
    case "text":
      return d.text(n.text);
    case "code":
      return d.code(n.text);
    case "bold":
      return d.bold(self(n.children));
    case "italic":
      return d.italic(self(n.children));
    case "strike":
      return d.strike(self(n.children));
    case "spoiler":
      return d.spoiler(self(n.children));
    case "link":
      return d.link(n.url, n.children, self);
    case "autolink":
      return d.autolink(n.url);
    case "token":
      return d.token(n.text);
  }
}

export function renderBlocks(blocks: Block[], d: Dialect): string {
  const out: string[] = [];
  let quote: string[] = [];
  const flushQuote = (): void => {
    if (quote.length) out.push(d.quote(quote));
    quote = [];
  };
  for (const b of blocks) {
    if (b.kind === "quote") {
      quote.push(renderInline(b.inline, d));
      continue;
    }
    flushQuote();
    switch (b.kind) {
      case "fence":
        out.push(d.fence(b.lang, b.code));
        break;
      case "heading":
        out.push(d.heading(renderInline(b.inline, d)));
        break;
      case "item":
        out.push(d.item(b, renderInline(b.inline, d)));
        break;
      case "rule":
        out.push(d.rule());
        break;
      case "line":
        out.push(renderInline(b.inline, d));
        break;
    }
  }
  flushQuote();
  return out.join("\n");
}
