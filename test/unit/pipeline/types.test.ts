import { describe, expect, it } from "vitest";
import { parseInput, turnRequestSchema } from "../../../src/pipeline/schema.js";
import { canCollect, TURN_ORIGINS, type TurnRequest } from "../../../src/pipeline/types.js";

const base: TurnRequest = { sessionKey: "s", agentId: "main", text: "a", deliver: true, origin: "inbound" };

describe("canCollect (collect-mode folding rule)", () => {
  it.each([
    ["two inbound messages", {}, {}, true],
    ["two operator messages", { origin: "operator" }, { origin: "operator" }, true],
    ["different text and provenance", {}, { text: "b", provenance: { kind: "external_user" } }, true],
    ["inbound then operator", {}, { origin: "operator" }, false],
    ["a2a", { origin: "a2a" }, { origin: "a2a" }, false],
    ["announce", { origin: "announce" }, { origin: "announce" }, false],
    ["sessions_send", { origin: "sessions_send" }, { origin: "sessions_send" }, false],
    ["different deliver", {}, { deliver: false }, false],
    ["different agent", {}, { agentId: "other" }, false],
    ["different timeout", { timeoutMs: 1000 }, {}, false],
    ["same timeout", { timeoutMs: 1000 }, { timeoutMs: 1000 }, true],
    ["inbound then a cron tick", {}, { origin: "cron" }, false],
    ["two cron ticks", { origin: "cron" }, { origin: "cron" }, false],
    ["two webhook turns", { origin: "hook" }, { origin: "hook" }, false],
    ["two chat commands", { origin: "command" }, { origin: "command" }, false],
  ] as const)("%s → %s", (_name, a, b, expected) => {
    expect(canCollect({ ...base, ...a }, { ...base, ...b })).toBe(expected);
  });
});

describe("turn requests", () => {
  it("accept only the known origins, naming the field otherwise", () => {
    for (const origin of TURN_ORIGINS)
      expect(parseInput(turnRequestSchema, { ...base, origin }, "turn").origin).toBe(origin);
    expect(() => parseInput(turnRequestSchema, { ...base, origin: "whatever" }, "turn")).toThrow(
      /turn\.origin/,
    );
  });
});
