import type { Tokens } from "marked";

/**
 * A dialect says how to write each construct; `renderTokens` walks marked's tokens (lex.ts), so
 * every dialect handles the same constructs and differs only in syntax. The lines of the text are
 * kept as they were: each block is followed by the line breaks its source had, so blank lines,
 * list lines and quote lines come out where the model put them.
 */
export interface Dialect {
  text(s: string): string;
  code(s: string): string;
  bold(inner: string): string;
  italic(inner: string): string;
  strike(inner: string): string;
  spoiler(inner: string): string;
  /** `label` is rendered; `labelText` is the same label without any markup. */
  link(url: string, label: string, labelText: string): string;
  autolink(url: string): string;
  /** A platform token such as `<@U123>` or `<!here>`. */
  token(raw: string): string;
  fence(lang: string, code: string): string;
  heading(inner: string): string;
  /** The lines of a quote, already rendered. */
  quote(lines: string[]): string;
  /** One list item: `marker` as written (`-`, `*`, `+`, `3.`), `indent` from its nesting. */
  item(item: { marker: string; ordered: boolean; indent: string }, inner: string): string;
  rule(): string;
}

type Token = Tokens.Generic;

/** The line breaks a token's source ended with (they separate it from the next block). */
function trailingBreaks(raw: string): string {
  let n = raw.length;
  while (n > 0 && raw.charCodeAt(n - 1) === 10) n--;
  return raw.slice(n);
}

const withoutBreaks = (raw: string): string => raw.replace(/\n+$/, "");

export function renderTokens(tokens: readonly Token[], d: Dialect, depth = 0): string {
  let out = "";
  for (const t of tokens) out += renderBlock(t, d, depth) + trailingBreaks(t.raw);
  return out;
}

function renderBlock(t: Token, d: Dialect, depth: number): string {
  switch (t.type) {
    case "space":
      return "";
    case "paragraph":
    case "text":
      return t.tokens ? renderInline(t.tokens, d) : d.text(t.text as string);
    case "heading":
      return d.heading(renderInline(t.tokens ?? [], d));
    case "code":
      return d.fence(((t.lang as string | undefined) ?? "").split(/\s/)[0] ?? "", t.text as string);
    case "hr":
      return d.rule();
    case "blockquote":
      return d.quote(withoutBreaks(renderTokens(t.tokens ?? [], d, depth)).split("\n"));
    case "list":
      return renderList(t as Tokens.List, d, depth);
    default:
      // tables, HTML blocks, link definitions: shown as written
      return d.text(withoutBreaks(t.raw));
  }
}

function renderList(list: Tokens.List, d: Dialect, depth: number): string {
  const indent = "  ".repeat(depth);
  const under = `${indent}  `; // the item's own lines after its first sit under its text
  let out = "";
  list.items.forEach((item, i) => {
    const written = /^\s*([-*+]|\d{1,9}[.)])/.exec(item.raw)?.[1];
    const marker = written ?? (list.ordered ? `${Number(list.start || 1) + i}.` : "-");
    let inner = "";
    for (const t of item.tokens as Token[]) {
      if (t.type === "list") {
        inner = `${withoutBreaks(inner)}\n${renderList(t as Tokens.List, d, depth + 1)}${trailingBreaks(t.raw)}`;
        continue;
      }
      let block =
        (t.type === "checkbox" ? d.text(t.raw) : renderBlock(t, d, depth + 1)) + trailingBreaks(t.raw);
      block = block.replace(/\n(?=[^\n])/g, `\n${under}`);
      if (inner.endsWith("\n") && block) block = under + block;
      inner += block;
    }
    out += d.item({ marker, ordered: list.ordered, indent }, withoutBreaks(inner)) + trailingBreaks(item.raw);
  });
  return withoutBreaks(out);
}

export function renderInline(tokens: readonly Token[], d: Dialect): string {
  let out = "";
  for (const t of tokens) out += renderSpan(t, d);
  return out;
}

function renderSpan(t: Token, d: Dialect): string {
  switch (t.type) {
    case "text":
      return t.tokens ? renderInline(t.tokens, d) : d.text(t.text as string);
    case "escape":
      return d.text(t.text as string);
    case "codespan":
      return d.code(t.text as string);
    case "strong":
      return d.bold(renderInline(t.tokens ?? [], d));
    case "em":
      return d.italic(renderInline(t.tokens ?? [], d));
    case "del":
      return d.strike(renderInline(t.tokens ?? [], d));
    case "spoiler":
      return d.spoiler(renderInline(t.tokens ?? [], d));
    case "platformToken":
      return d.token(t.raw);
    case "br":
      return "\n";
    case "link":
    case "image": {
      const href = t.href as string;
      // `<https://…>` is an autolink; a bare URL in the text (GFM) stays text, as it was written
      if (t.raw.startsWith("<")) {
        const text = t.text as string;
        return text === href ? d.autolink(href) : d.link(href, d.text(text), text); // <a@b.c>: mailto:
      }
      if (!t.raw.startsWith("[") && !t.raw.startsWith("![")) return d.text(t.raw);
      const label = t.type === "image" ? d.text(t.text as string) : renderInline(t.tokens ?? [], d);
      return d.link(href, label, t.type === "image" ? (t.text as string) : plainOf(t.tokens ?? []));
    }
    default:
      // inline HTML and anything else: shown as written
      return d.text(t.raw);
  }
}

/** The text of inline tokens without any markup (link labels). */
function plainOf(tokens: readonly Token[]): string {
  let out = "";
  for (const t of tokens) {
    if (t.tokens) out += plainOf(t.tokens);
    else if (t.type === "br") out += "\n";
    else out += typeof t.text === "string" ? t.text : t.raw;
  }
  return out;
}
