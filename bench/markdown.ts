/**
 * Rendering a reply for a platform (Markdown → Telegram HTML, Slack mrkdwn, WhatsApp, plain), as
 * delivery does once per chunk of every reply: CPU per render of three typical replies (a short
 * answer, an answer with a list, a link and a code fence, and a long ~3,000-character one). The
 * figure is a part of a turn's CPU, so it sits beside the gateway's per-turn figure.
 *
 *   npx tsx bench/markdown.ts      # prints a table and one {"bench":"markdown",…} line
 */
import { renderMarkdown } from "../src/channels/kit/format/index.js";

const SHORT = "Sure — the build is **green** again; `npm test` passes on main.";
const MIXED = [
  "## What changed",
  "",
  "- the *retry* loop is bounded (see [the docs](https://example.dev/retry?x=1&y=2))",
  "- `chunkText` keeps fences whole",
  "  - nested: snake_case_names stay literal",
  "1. first",
  "2. second",
  "",
  "> quoted line one",
  "> quoted line two",
  "",
  "```ts",
  "const a = b < c && d > e;",
  "```",
  "",
  "Done ~~maybe~~ for sure.",
].join("\n");
const LONG = Array.from(
  { length: 12 },
  (_, i) => `${i % 3 === 0 ? `### Part ${i}\n` : ""}${MIXED.slice(0, 240)} **${i}**`,
).join("\n\n");

const DIALECTS = ["telegram-html", "slack-mrkdwn", "whatsapp", "plain"] as const;
const CASES: Array<[string, string]> = [
  ["short", SHORT],
  ["mixed", MIXED],
  ["long", LONG],
];

function measure(md: string, dialect: (typeof DIALECTS)[number], iterations: number): number {
  const start = process.cpuUsage();
  for (let i = 0; i < iterations; i++) renderMarkdown(md, dialect);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / iterations; // µs per render
}

const results: Record<string, number> = {};
process.stdout.write(
  `case      chars  ${DIALECTS.map((d) => d.padStart(14)).join("")}   (µs CPU per render, warm)\n`,
);
for (const [name, md] of CASES) {
  const iterations = Math.max(200, Math.round(2_000_000 / md.length));
  for (const d of DIALECTS) measure(md, d, iterations); // warm up
  const row: string[] = [];
  for (const d of DIALECTS) {
    // median of 5 rounds
    const rounds = Array.from({ length: 5 }, () => measure(md, d, iterations)).sort((a, b) => a - b);
    const us = rounds[2] ?? 0;
    results[`${name}_${d}_us`] = Number(us.toFixed(2));
    row.push(us.toFixed(2).padStart(14));
  }
  process.stdout.write(`${name.padEnd(8)}${String(md.length).padStart(7)}  ${row.join("")}\n`);
}
process.stdout.write(`${JSON.stringify({ bench: "markdown", ...results })}\n`);
