import { describe, expect, it } from "vitest";
import { chunkText } from "../../../../src/channels/kit/chunk.js";
import { seededRandom } from "../../../helpers.js";

/** Chunks minus the fence repair (a closing line added at a cut and the reopening line after it). */
function unrepair(chunks: string[]): string[] {
  return chunks.map((c, i) => {
    let s = c;
    if (i > 0 && /^(`{3,}|~{3,})[^\n]*\n/.test(s) && /\n(`{3,}|~{3,})$/.test(chunks[i - 1] ?? "")) {
      s = s.replace(/^[^\n]*\n/, "");
    }
    if (
      i < chunks.length - 1 &&
      /\n(`{3,}|~{3,})$/.test(s) &&
      /^(`{3,}|~{3,})[^\n]*\n/.test(chunks[i + 1] ?? "")
    ) {
      s = s.replace(/\n[^\n]*$/, "");
    }
    return s;
  });
}

const words = (s: string): string[] => s.split(/\s+/).filter(Boolean);

describe("chunkText", () => {
  it("returns short text unchanged and empty text as no chunks", () => {
    expect(chunkText("hello", 5)).toEqual(["hello"]);
    expect(chunkText("", 10)).toEqual([]);
  });

  it("rejects a limit that is not a positive integer", () => {
    expect(() => chunkText("x", 0)).toThrow(/limit/);
    expect(() => chunkText("x", 2.5)).toThrow(/limit/);
  });

  it("prefers a paragraph break over a later line break", () => {
    const text = "para one line\n\npara two first\npara two second";
    const chunks = chunkText(text, 34);
    expect(chunks).toEqual(["para one line", "para two first\npara two second"]);
  });

  it("falls back to a line break, then to a space, then to a hard cut", () => {
    expect(chunkText("aaaa bbbb\ncccc dddd", 12)).toEqual(["aaaa bbbb", "cccc dddd"]);
    expect(chunkText("aaaa bbbb cccc", 10)).toEqual(["aaaa bbbb", "cccc"]);
    expect(chunkText("abcdefghij", 4)).toEqual(["abcd", "efgh", "ij"]);
  });

  it("keeps the indentation of the line after a cut", () => {
    const chunks = chunkText("first line here\n  indented second", 18);
    expect(chunks).toEqual(["first line here", "  indented second"]);
  });

  it("never splits a surrogate pair in a hard cut", () => {
    const text = "😀".repeat(5); // 10 UTF-16 units
    const chunks = chunkText(text, 3);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(3);
      expect(c).not.toMatch(/[\ud800-\udbff]$/);
      expect(c).not.toMatch(/^[\udc00-\udfff]/);
    }
    expect(chunks.join("")).toBe(text);
  });

  it("moves a whole code fence to the next chunk when it fits there", () => {
    const fence = "```ts\nconst a = 1;\nconst b = 2;\n```";
    const text = `Intro text that is long enough.\n${fence}\nOutro.`;
    const chunks = chunkText(text, fence.length + 8);
    expect(chunks[0]).toBe("Intro text that is long enough.");
    expect(chunks[1]).toBe(`${fence}\nOutro.`.slice(0, chunks[1]?.length));
    expect(chunks.some((c) => c.includes(fence))).toBe(true);
  });

  it("closes a fence that must be split and reopens it with the same language", () => {
    const code = Array.from({ length: 30 }, (_, i) => `line ${i} = value_${i};`).join("\n");
    const text = `Here is code:\n\n\`\`\`python\n${code}\n\`\`\`\nDone.`;
    const chunks = chunkText(text, 120);
    expect(chunks.length).toBeGreaterThan(3);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(120);
      // Every chunk has balanced fences, so each renders on its own.
      expect((c.match(/^```/gm) ?? []).length % 2).toBe(0);
    }
    const inner = chunks.filter((c) => c.includes("line "));
    for (const c of inner) expect(c.startsWith("```python\n")).toBe(true);
    expect(unrepair(chunks).join("\n")).toBe(text.replace("Here is code:\n\n", "Here is code:\n"));
  });

  it("keeps a tilde fence marker when reopening", () => {
    const code = Array.from({ length: 10 }, (_, i) => `x${i}`).join("\n");
    const chunks = chunkText(`~~~~sh\n${code}\n~~~~`, 20);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) {
      expect(c.startsWith("~~~~sh\n")).toBe(true);
      expect(c.endsWith("\n~~~~")).toBe(true);
      expect(c.length).toBeLessThanOrEqual(20);
    }
  });

  it("splits a single code line longer than the limit inside the fence", () => {
    const text = `\`\`\`\n${"x".repeat(50)}\n\`\`\``;
    const chunks = chunkText(text, 20);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(20);
      expect(c.startsWith("```\n")).toBe(true);
      expect(c.endsWith("\n```")).toBe(true);
    }
    expect(chunks.map((c) => c.slice(4, -4)).join("")).toBe("x".repeat(50));
  });

  it("still respects the limit when it is too small to repair a fence", () => {
    const chunks = chunkText("```javascript\nabcdef\n```", 6);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(6);
    expect(chunks.join("").replace(/\s/g, "")).toBe("```javascriptabcdef```");
  });

  it("property: random markdown — chunks within the limit, words preserved, fences balanced", () => {
    const rand = seededRandom(42);
    const vocab = ["alpha", "beta", "gamma", "delta", "**bold**", "`code`", "a-very-long-identifier-name"];
    for (let round = 0; round < 150; round++) {
      const parts: string[] = [];
      const n = 1 + Math.floor(rand() * 12);
      for (let p = 0; p < n; p++) {
        if (rand() < 0.25) {
          const lines = Array.from({ length: 1 + Math.floor(rand() * 15) }, () =>
            Array.from(
              { length: 1 + Math.floor(rand() * 8) },
              () => vocab[Math.floor(rand() * vocab.length)],
            ).join(" "),
          );
          parts.push(`\`\`\`${rand() < 0.5 ? "js" : ""}\n${lines.join("\n")}\n\`\`\``);
        } else {
          const len = 1 + Math.floor(rand() * 40);
          parts.push(
            Array.from({ length: len }, () => vocab[Math.floor(rand() * vocab.length)]).join(
              rand() < 0.1 ? "\n" : " ",
            ),
          );
        }
      }
      const text = parts.join(rand() < 0.5 ? "\n\n" : "\n");
      const limit = 40 + Math.floor(rand() * 300);
      const chunks = chunkText(text, limit);
      for (const c of chunks) {
        expect(c.length).toBeLessThanOrEqual(limit);
        expect((c.match(/^```/gm) ?? []).length % 2).toBe(0);
      }
      // No word is lost or invented (a hard cut may split a word, so compare the letters;
      // fence markers are left out because repair adds some).
      const prose = (s: string): string => words(s.replace(/^(`{3,}|~{3,}).*$/gm, "")).join("");
      expect(prose(chunks.join("\n"))).toBe(prose(text));
    }
  });
});
