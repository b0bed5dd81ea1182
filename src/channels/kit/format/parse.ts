/**
 * A deliberately small Markdown reader: the subset models actually produce (fences, headings,
 * quotes, lists, emphasis, code spans, links). It is line-based and never throws; anything it
 * does not recognise stays literal text. Every dialect renderer walks the same tree.
 */

export type Inline =
  | { kind: "text"; text: string }
  | { kind: "code"; text: string }
  | { kind: "bold" | "italic" | "strike" | "spoiler"; children: Inline[] }
  | { kind: "link"; url: string; children: Inline[] }
  /** `<https://…>` or `<mailto:…>`. */
  | { kind: "autolink"; url: string }
  /** A Slack-style token such as `<@U123>`, `<#C123|general>` or `<!here>`, kept verbatim where it means something. */
  | { kind: "token"; text: string };

export type Block =
  | { kind: "fence"; lang: string; code: string }
  | { kind: "heading"; inline: Inline[] }
  | { kind: "quote"; inline: Inline[] }
  /** `marker` is the original list marker (`-`, `*`, `+` or `3.`); `indent` its leading spaces. */
  | { kind: "item"; marker: string; ordered: boolean; indent: string; inline: Inline[] }
  | { kind: "rule" }
  | { kind: "line"; inline: Inline[] };

/** A fence opening line: marker in group 1, language in group 2. Shared with `chunkText`. */
export const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;

export function parseMarkdown(md: string): Block[] {
  const lines = md.replace(/\r\n?/g, "\n").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const fence = FENCE_OPEN.exec(line);
    if (fence) {
      const marker = fence[1] ?? "```";
      const body: string[] = [];
      let j = i + 1;
      // An unterminated fence runs to the end of the text, as in CommonMark.
      while (j < lines.length && !isFenceClose(lines[j] ?? "", marker)) body.push(lines[j++] ?? "");
      blocks.push({ kind: "fence", lang: fence[2] ?? "", code: body.join("\n") });
      i = j;
      continue;
    }
    blocks.push(parseLine(line));
  }
  return blocks;
}

export function isFenceClose(line: string, marker: string): boolean {
  const t = line.trim();
  return t.length >= marker.length && t[0] === marker[0] && /^(`+|~+)$/.test(t);
}

function parseLine(line: string): Block {
  const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line);
  if (heading) return { kind: "heading", inline: parseInline(heading[1] ?? "") };
  if (/^ {0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) return { kind: "rule" };
  const quote = /^ {0,3}> ?(.*)$/.exec(line);
  if (quote) return { kind: "quote", inline: parseInline(quote[1] ?? "") };
  const item = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
  if (item) {
    const marker = item[2] ?? "-";
    return {
      kind: "item",
      marker,
      ordered: /\d/.test(marker),
      indent: item[1] ?? "",
      inline: parseInline(item[3] ?? ""),
    };
  }
  return { kind: "line", inline: parseInline(line) };
}

// ---------------------------------------------------------------------------------------------
// Inline

const PUNCT = /[!-/:-@[-`{-~]/;
const isWord = (c: string | undefined): boolean => c !== undefined && /[\p{L}\p{N}]/u.test(c);
const isSpace = (c: string | undefined): boolean => c === undefined || /\s/.test(c);

export function parseInline(s: string): Inline[] {
  const out: Inline[] = [];
  let text = "";
  const flush = (): void => {
    if (text) out.push({ kind: "text", text });
    text = "";
  };
  let i = 0;
  while (i < s.length) {
    const c = s[i] as string;
    if (c === "\\" && i + 1 < s.length && PUNCT.test(s[i + 1] as string)) {
      text += s[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const span = codeSpanAt(s, i);
      if (span) {
        flush();
        out.push({ kind: "code", text: span.text });
        i = span.end;
        continue;
      }
      const run = runLength(s, i, "`");
      text += s.slice(i, i + run);
      i += run;
      continue;
    }
    if (c === "<") {
      const m = /^<((?:https?|mailto|tg):[^\s<>]+)>/.exec(s.slice(i));
      if (m) {
        flush();
        out.push({ kind: "autolink", url: m[1] ?? "" });
        i += m[0].length;
        continue;
      }
      const t = /^<[@#!][^\s<>]*>/.exec(s.slice(i));
      if (t) {
        flush();
        out.push({ kind: "token", text: t[0] });
        i += t[0].length;
        continue;
      }
    }
    if (c === "[" || (c === "!" && s[i + 1] === "[")) {
      const link = linkAt(s, c === "!" ? i + 1 : i);
      if (link) {
        flush();
        out.push({ kind: "link", url: link.url, children: parseInline(link.label) });
        i = link.end;
        continue;
      }
    }
    const span = emphasisAt(s, i);
    if (span) {
      flush();
      out.push(span.node);
      i = span.end;
      continue;
    }
    text += c;
    i++;
  }
  flush();
  return out;
}

function runLength(s: string, i: number, ch: string): number {
  let n = 0;
  while (s[i + n] === ch) n++;
  return n;
}

function codeSpanAt(s: string, i: number): { text: string; end: number } | undefined {
  const n = runLength(s, i, "`");
  let j = i + n;
  while (j < s.length) {
    const k = s.indexOf("`", j);
    if (k < 0) return undefined;
    const m = runLength(s, k, "`");
    if (m === n) {
      let text = s.slice(i + n, k);
      if (text.length > 2 && text.startsWith(" ") && text.endsWith(" ") && text.trim())
        text = text.slice(1, -1);
      return { text, end: k + m };
    }
    j = k + m;
  }
  return undefined;
}

function linkAt(s: string, i: number): { label: string; url: string; end: number } | undefined {
  let depth = 0;
  let j = i;
  for (; j < s.length; j++) {
    const ch = s[j];
    if (ch === "\\") j++;
    else if (ch === "[") depth++;
    else if (ch === "]" && --depth === 0) break;
  }
  if (j >= s.length || s[j + 1] !== "(") return undefined;
  const label = s.slice(i + 1, j);
  let k = j + 2;
  let parens = 1;
  for (; k < s.length; k++) {
    if (s[k] === "(") parens++;
    else if (s[k] === ")" && --parens === 0) break;
    else if (s[k] === " " || s[k] === "\n") break;
  }
  if (k >= s.length || s[k] !== ")") {
    // `[label](url "title")`: accept a title and drop it.
    const titled = /^\(([^\s()]+)\s+"[^"]*"\)/.exec(s.slice(j + 1));
    if (!titled) return undefined;
    return { label, url: titled[1] ?? "", end: j + 1 + titled[0].length };
  }
  const url = s.slice(j + 2, k).replace(/^<|>$/g, "");
  if (!url) return undefined;
  return { label, url, end: k + 1 };
}

const DELIMS: ReadonlyArray<{ d: string; kind: "bold" | "italic" | "strike" | "spoiler" }> = [
  { d: "**", kind: "bold" },
  { d: "__", kind: "bold" },
  { d: "~~", kind: "strike" },
  { d: "||", kind: "spoiler" },
  { d: "*", kind: "italic" },
  { d: "_", kind: "italic" },
];

function emphasisAt(s: string, i: number): { node: Inline; end: number } | undefined {
  for (const { d, kind } of DELIMS) {
    if (!s.startsWith(d, i)) continue;
    // Single-character delimiters must not be part of a longer run (`***` is handled as `**` + `*`).
    if (d.length === 1 && s[i + 1] === d) continue;
    const after = s[i + d.length];
    if (isSpace(after)) continue;
    // Underscores inside words (snake_case) are literal.
    if (d[0] === "_" && isWord(s[i - 1])) continue;
    const close = findClose(s, i + d.length, d);
    if (close < 0) continue;
    return { node: { kind, children: parseInline(s.slice(i + d.length, close)) }, end: close + d.length };
  }
  return undefined;
}

/** First valid closing delimiter at or after `from`, skipping code spans and escapes. */
function findClose(s: string, from: number, d: string): number {
  for (let j = from + 1; j <= s.length - d.length; j++) {
    const ch = s[j];
    if (ch === "\\") {
      j++;
      continue;
    }
    if (ch === "`") {
      const span = codeSpanAt(s, j);
      if (span) {
        j = span.end - 1;
        continue;
      }
    }
    if (!s.startsWith(d, j)) continue;
    if (isSpace(s[j - 1])) continue;
    if (d.length === 1 && (s[j + 1] === d || s[j - 1] === d)) continue;
    if (d[0] === "_" && isWord(s[j + d.length])) continue;
    return j;
  }
  return -1;
}

/** The text of an inline tree without any markup (link labels only). */
export function inlineText(nodes: Inline[]): string {
  return nodes
    .map((n) => {
      switch (n.kind) {
        case "text":
        case "code":
        case "token":
          return n.text;
        case "autolink":
          return n.url;
        default:
          return inlineText(n.children);
      }
    })
    .join("");
}
