import { Lexer } from "marked";
import { describe, expect, it } from "vitest";
import { fenceOpen, isFenceClose } from "../../src/fence.js";

/** Whether marked (what renders the platforms' text) reads `text` as one fenced code block. */
function markedFence(text: string): boolean {
  const tokens = new Lexer({ gfm: true }).lex(text);
  return (
    tokens[0]?.type === "code" && (tokens[0] as { codeBlockStyle?: string }).codeBlockStyle !== "indented"
  );
}

describe("the fence rule agrees with marked", () => {
  const openers = [
    "```",
    "```ts",
    "``` ts extra",
    "~~~",
    "~~~ foo`bar",
    "````md",
    "   ```",
    "    ```",
    "``",
    "```a`b",
    " ~~~py",
  ];
  it.each(openers)("opening line %j", (line) => {
    expect(fenceOpen(line) !== null).toBe(markedFence(`${line}\nx`));
  });

  const closers: Array<[string, string]> = [
    ["```", "```"],
    ["```", "````"],
    ["````", "```"],
    ["```", "~~~"],
    ["~~~", "~~~~  "],
    ["```", "   ```"],
    ["```", "    ```"],
    ["```", "``` x"],
  ];
  it.each(closers)("block opened with %j closed by %j", (open, close) => {
    // closed: "after" is outside the code block; open: it is code
    const tokens = new Lexer({ gfm: true }).lex(`${open}\nx\n${close}\nafter`);
    const closedByMarked = !(tokens[0] as { text?: string }).text?.includes("after");
    expect(isFenceClose(close, fenceOpen(open)?.marker ?? "")).toBe(closedByMarked);
  });

  it("reads the language as the first word of the info string", () => {
    expect(fenceOpen("```ts title=x")).toEqual({ marker: "```", lang: "ts" });
    expect(fenceOpen("~~~~\n")).toEqual({ marker: "~~~~", lang: "" });
  });
});
