import { describe, expect, it } from "vitest";
import { renderUserContent } from "../../../../src/agent/prompt.js";
import { createScriptedProvider, fallbackReply } from "../../../../src/agent/providers/scripted.js";
import { silentLogger } from "../../../../src/log.js";
import { formatAnnounce } from "../../../../src/subagents/announce-text.js";
import { childTaskText } from "../../../../src/subagents/prompts.js";

describe("scripted demo: sub-agent tasks and announces read like a model's", () => {
  it("answers a sub-agent task with a short result, not an echo of its prompt", () => {
    const prompt = renderUserContent(
      childTaskText({
        depth: 1,
        maxDepth: 1,
        requesterKey: "main",
        mode: "run",
        task: "find three cafés near the station",
      }),
      { kind: "inter_session", sourceSessionKey: "main" },
    );
    const reply = fallbackReply(prompt);
    expect(reply).toContain("find three cafés near the station");
    expect(reply).not.toContain("Inter-session");
    expect(reply).not.toContain("sub-agent (depth");
    expect(reply).not.toContain("You said");
    expect(reply.length).toBeLessThan(300);
  });

  it("summarises a completion announce in one line instead of echoing the envelope", () => {
    const announce = formatAnnounce({
      status: "ok",
      result: { text: "Done: “cafés”. Three found.\nmore detail", source: "reply" },
      label: "cafés",
      childKey: "agent:main:subagent:x",
    });
    const reply = fallbackReply(
      renderUserContent(announce, { kind: "subagent_announce", sourceSessionKey: "agent:main:subagent:x" }),
    );
    expect(reply).toBe("The sub-agent for “cafés” finished: Done: “cafés”. Three found.");
    expect(reply).not.toContain("Stats:");
  });

  it("echoes routed messages without the inter-session header", () => {
    const text = renderUserContent("ping from a peer", { kind: "inter_session", sourceSessionKey: "x" });
    expect(fallbackReply(text)).toBe("You said: ping from a peer");
  });

  it("streams word-sized deltas whose concatenation is the text", async () => {
    const p = createScriptedProvider("scripted", { kind: "scripted", models: {} } as never, silentLogger());
    const deltas: string[] = [];
    const res = await p.complete({
      model: "demo",
      system: "",
      messages: [{ role: "user", content: "hello there friend" }],
      tools: [],
      onTextDelta: (d) => deltas.push(d),
    });
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.join("")).toBe(res.text);
  });
});
