/**
 * Assistant text normalisation (SEMANTICS §3): removes thinking, memory scaffolding, plain-text
 * tool-call XML, downgraded tool markers and leaked control tokens, leaving code as is.
 */

/**
 * Replaces fenced blocks and inline code spans with placeholders so stripping never touches
 * them; `restore` puts them back. Code inside a stripped block (e.g. thinking) goes with it.
 */
function protectCode(text: string): { masked: string; restore: (s: string) => string } {
  const spans: string[] = [];
  let nonce = "c";
  while (text.includes(`\uE000${nonce}`)) nonce += "c";
  const hold = (s: string) => {
    spans.push(s);
    return `\uE000${nonce}${spans.length - 1}\uE001`;
  };
  const lines = text.split(/(?<=\n)/);
  let out = "";
  let plain = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const open = /^ {0,3}(`{3,}|~{3,})([^\n]*)/.exec(line);
    // A backtick fence's info string may not contain backticks (CommonMark).
    if (!open || (open[1]?.[0] === "`" && open[2]?.includes("`"))) {
      plain += line;
      continue;
    }
    out += protectInline(plain, hold);
    plain = "";
    const fence = open[1] ?? "```";
    let block = line;
    let closed = false;
    while (++i < lines.length) {
      const l = lines[i] ?? "";
      block += l;
      const close = /^ {0,3}(`{3,}|~{3,})[ \t]*\n?$/.exec(l);
      if (close && close[1]?.[0] === fence[0] && (close[1]?.length ?? 0) >= fence.length) {
        closed = true;
        break;
      }
    }
    // The newline after a closing fence stays outside, so whitespace clean-up can see it.
    out += closed && block.endsWith("\n") ? `${hold(block.slice(0, -1))}\n` : hold(block);
  }
  out += protectInline(plain, hold);
  const restoreRe = new RegExp(`\uE000${nonce}(\\d+)\uE001`, "g");
  return { masked: out, restore: (s) => s.replace(restoreRe, (_m, n: string) => spans[Number(n)] ?? "") };
}

/** Inline code: a backtick run closed by the next run of the same length (CommonMark). */
function protectInline(s: string, hold: (span: string) => string): string {
  let out = "";
  let i = 0;
  const unmatched = new Set<number>();
  while (i < s.length) {
    const j = s.indexOf("`", i);
    if (j === -1) break;
    let k = j;
    while (s[k] === "`") k++;
    const run = k - j;
    let close = -1;
    if (!unmatched.has(run)) {
      let from = k;
      for (;;) {
        const c = s.indexOf("`", from);
        if (c === -1) break;
        let e = c;
        while (s[e] === "`") e++;
        if (e - c === run) {
          close = c;
          break;
        }
        from = e;
      }
      // No closer of this length later on: later runs of the same length cannot close either.
      if (close === -1) unmatched.add(run);
    }
    if (close === -1) {
      out += s.slice(i, k);
      i = k;
      continue;
    }
    out += s.slice(i, j) + hold(s.slice(j, close + run));
    i = close + run;
  }
  return out + s.slice(i);
}

interface TagFamily {
  names: string;
  /** An orphan closing tag means everything before it was this kind of block (thinking). */
  orphanCloseSwallowsPrefix: boolean;
}

const TAG_FAMILIES: readonly TagFamily[] = [
  { names: "think|thinking|thought|antthinking", orphanCloseSwallowsPrefix: true },
  { names: "relevant[-_]memories", orphanCloseSwallowsPrefix: false },
  { names: "tool_calls|tool_call|function_calls|function_call|invoke", orphanCloseSwallowsPrefix: false },
];

const FAMILY_RES = TAG_FAMILIES.map((f) => ({
  family: f,
  open: new RegExp(String.raw`<(?:[\w-]+:)?(?:${f.names})(?![\w-])[^<>]*>`, "gi"),
  close: new RegExp(String.raw`<\/(?:[\w-]+:)?(?:${f.names})\s*>`, "gi"),
}));

/**
 * Removes open…close blocks of one family, and an unterminated block to the end. Scans forward
 * once (a regex with a lazy body would rescan the rest of the text for every unclosed open tag).
 */
function stripFamily(t: string, f: (typeof FAMILY_RES)[number]): string {
  let out = "";
  let pos = 0;
  for (;;) {
    f.open.lastIndex = pos;
    const o = f.open.exec(t);
    if (!o) break;
    out += t.slice(pos, o.index);
    f.close.lastIndex = o.index + o[0].length;
    const c = f.close.exec(t);
    if (!c) return out;
    pos = c.index + c[0].length;
  }
  out += t.slice(pos);
  // Orphan closing tags: for thinking, everything before the last one was thinking.
  f.close.lastIndex = 0;
  if (!f.family.orphanCloseSwallowsPrefix) return out.replace(f.close, "");
  let cut = -1;
  for (const m of out.matchAll(f.close)) cut = m.index + m[0].length;
  return cut === -1 ? out : out.slice(cut);
}

const MARKER_RE =
  /\[(?:Tool Call:[^\n]*(?:\n[ \t]*Arguments:[^\n]*)?|Tool Result\b[^\n]*|Historical context\b[^\n]*)/gi;
const CONTROL_TOKEN_RE = /<[|｜][^|｜\n<>]{0,100}[|｜]>/g;

/**
 * Removes thinking, memory scaffolding, plain-text tool-call XML (also unterminated), downgraded
 * tool markers and leaked control tokens from assistant text, leaving fenced and inline code as is.
 */
export function stripAssistantScaffolding(text: string): { text: string; stripped: boolean } {
  if (!/[<[]/.test(text)) return { text, stripped: false };
  const { masked, restore } = protectCode(text);
  let t = masked;
  for (const f of FAMILY_RES) t = stripFamily(t, f);
  t = t.replace(MARKER_RE, "").replace(CONTROL_TOKEN_RE, "");
  if (t === masked) return { text, stripped: false };
  t = t
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
  return { text: restore(t), stripped: true };
}
