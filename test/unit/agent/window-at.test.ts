import { describe, expect, it } from "vitest";
import { windowAt } from "../../../src/agent/runtime.js";
import type { TranscriptMessage } from "../../../src/store/types.js";

const msg = (id: string, runId: string, role: TranscriptMessage["role"] = "assistant"): TranscriptMessage =>
  ({ id, runId, role, content: id, sessionId: "s1", timestamp: 1 }) as TranscriptMessage;

const ids = (ms: TranscriptMessage[]) => ms.map((m) => m.id);

describe("windowAt: the window as a step of a run first saw it", () => {
  const older = Array.from({ length: 40 }, (_, i) => msg(`old${i}`, `r${i}`, i % 2 ? "assistant" : "user"));

  it("a first attempt gets the tail itself, not a copy", () => {
    const tail = [...older, msg("R:in", "R", "user")];
    expect(windowAt(tail, "R", 0)).toBe(tail);
  });

  it("a re-run leaves out what the run wrote at this step and later, keeping this step's steering", () => {
    const tail = [
      ...older,
      msg("R:in", "R", "user"),
      msg("R:s0:call", "R", "toolCall"),
      msg("R:s0:result", "R", "toolResult"),
      msg("R:s1:steer:0", "R", "user"),
      msg("R:s1:reply", "R"),
      msg("R:s2:steer:0", "R", "user"),
    ];
    expect(ids(windowAt(tail, "R", 0)).slice(40)).toEqual(["R:in"]);
    expect(ids(windowAt(tail, "R", 1)).slice(40)).toEqual([
      "R:in",
      "R:s0:call",
      "R:s0:result",
      "R:s1:steer:0",
    ]);
    expect(windowAt(tail, "R", 1)).toHaveLength(44);
  });

  it("finds the run's messages behind messages of other runs written after them", () => {
    const tail = [...older, msg("R:in", "R", "user"), msg("R:s0:reply", "R"), msg("X:in", "X", "user")];
    expect(ids(windowAt(tail, "R", 0)).slice(40)).toEqual(["R:in", "X:in"]);
  });

  it("looks through the whole tail when the run's inbound message is not in it", () => {
    const tail = [msg("R:s0:call", "R", "toolCall"), msg("R:s0:result", "R", "toolResult"), ...older];
    expect(ids(windowAt(tail, "R", 0))).toEqual(ids(older));
    expect(windowAt(older, "R", 0)).toBe(older);
  });
});
