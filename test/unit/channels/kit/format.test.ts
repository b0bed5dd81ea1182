import { describe, expect, it } from "vitest";
import { renderMarkdown, telegramHtmlToPlain } from "../../../../src/channels/kit/format/index.js";

describe("renderMarkdown: telegram-html", () => {
  const r = (md: string): string => renderMarkdown(md, "telegram-html");

  it("escapes & < > in text and code", () => {
    expect(r("a < b && c > d")).toBe("a &lt; b &amp;&amp; c &gt; d");
    expect(r("`x<y>&z`")).toBe("<code>x&lt;y&gt;&amp;z</code>");
  });

  it("renders emphasis, strike, spoiler and links", () => {
    expect(r("**bold** and *it* and _it2_ ~~gone~~ ||secret||")).toBe(
      "<b>bold</b> and <i>it</i> and <i>it2</i> <s>gone</s> <tg-spoiler>secret</tg-spoiler>",
    );
    expect(r('see [the **docs**](https://x.dev/a?b=1&c="2")')).toBe(
      'see <a href="https://x.dev/a?b=1&amp;c=&quot;2&quot;">the <b>docs</b></a>',
    );
  });

  it("renders code fences with a language class, and without one", () => {
    expect(r("```ts\nconst a = b < c;\n```")).toBe(
      '<pre><code class="language-ts">const a = b &lt; c;</code></pre>',
    );
    expect(r("```\nplain\n```")).toBe("<pre><code>plain</code></pre>");
  });

  it("leaves markup inside code alone and snake_case words literal", () => {
    expect(r("`**not bold**` my_var_name")).toBe("<code>**not bold**</code> my_var_name");
    expect(r("```\n**x** _y_\n```")).toBe("<pre><code>**x** _y_</code></pre>");
  });

  it("turns headings bold, groups quotes and converts bullets", () => {
    expect(r("# Title\n> one\n> two\n- item\n  * nested\n1. first")).toBe(
      "<b>Title</b>\n<blockquote>one\ntwo</blockquote>\n• item\n  • nested\n1. first",
    );
  });

  it("keeps unmatched delimiters and backslash escapes literal", () => {
    expect(r("2 * 3 = 6 and a ** b")).toBe("2 * 3 = 6 and a ** b");
    expect(r("\\*not italic\\*")).toBe("*not italic*");
    expect(r("[broken](link")).toBe("[broken](link");
  });

  it("shows non-web link targets as text instead of an <a>", () => {
    expect(r("[x](javascript:alert(1))")).toBe("x (javascript:alert(1))");
  });
});

describe("renderMarkdown: slack-mrkdwn", () => {
  const r = (md: string): string => renderMarkdown(md, "slack-mrkdwn");

  it("maps emphasis to mrkdwn", () => {
    expect(r("**b** *i* ~~s~~ `c`")).toBe("*b* _i_ ~s~ `c`");
  });

  it("writes links as <url|label> and escapes & < >", () => {
    expect(r("[docs & more](https://x.dev/?a=1|2)")).toBe("<https://x.dev/?a=1%7C2|docs &amp; more>");
    expect(r("a < b & c")).toBe("a &lt; b &amp; c");
    expect(r("<https://x.dev>")).toBe("<https://x.dev>");
  });

  it("keeps Slack tokens (mentions, channels, specials) intact", () => {
    expect(r("hi <@U123> in <#C9|general> <!here> & <b>")).toBe(
      "hi <@U123> in <#C9|general> <!here> &amp; &lt;b&gt;",
    );
  });

  it("drops the language of a code fence and escapes its body", () => {
    expect(r("```js\nif (a < b) {}\n```")).toBe("```\nif (a &lt; b) {}\n```");
  });
});

describe("renderMarkdown: whatsapp, discord, plain", () => {
  it("whatsapp uses single-character markers and writes links out", () => {
    expect(renderMarkdown("**b** _i_ ~~s~~ [site](https://a.b)", "whatsapp")).toBe(
      "*b* _i_ ~s~ site (https://a.b)",
    );
    expect(renderMarkdown("[https://a.b](https://a.b) <x>", "whatsapp")).toBe("https://a.b <x>");
  });

  it("discord passes Markdown through", () => {
    const md = "**b** __u__ ```js\nx\n```";
    expect(renderMarkdown(md, "discord")).toBe(md);
    expect(renderMarkdown("a\r\nb", "discord")).toBe("a\nb");
  });

  it("plain strips markup but keeps link targets and code text", () => {
    expect(renderMarkdown("# T\n**b** `c` [l](https://u.v)\n```py\nx = 1\n```", "plain")).toBe(
      "T\nb c l (https://u.v)\nx = 1",
    );
  });
});

describe("telegramHtmlToPlain", () => {
  it("removes tags, decodes entities and keeps link targets", () => {
    expect(telegramHtmlToPlain('<b>a &lt; b</b> <a href="https://x.dev/?a=1&amp;b=2">docs</a> &amp;')).toBe(
      "a < b docs (https://x.dev/?a=1&b=2) &",
    );
    expect(telegramHtmlToPlain('<a href="https://x.dev">https://x.dev</a>')).toBe("https://x.dev");
  });

  it("round-trips rendered markdown back to its text", () => {
    const html = renderMarkdown("**x** < y & `z`", "telegram-html");
    expect(telegramHtmlToPlain(html)).toBe("x < y & z");
  });
});
