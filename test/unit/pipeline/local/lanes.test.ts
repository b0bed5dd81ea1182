import { describe, expect, it } from "vitest";
import { type LaneEntry, LaneScheduler } from "../../../../src/pipeline/local/lanes.js";
import type { TurnRequest } from "../../../../src/pipeline/types.js";

let n = 0;
function entry(
  sessionKey: string,
  text: string,
  extra: Partial<TurnRequest> = {},
  durable = true,
): LaneEntry {
  n++;
  return {
    runId: `r${n}-${text}`,
    req: { sessionKey, agentId: "main", text, deliver: false, origin: "inbound", ...extra },
    createdAt: n,
    started: 0,
    durable,
    removed: false,
  };
}

const texts = (t: { entries: LaneEntry[] } | null) => t?.entries.map((e) => e.req.text) ?? null;

describe("LaneScheduler", () => {
  it("takes one turn per lane at a time and rotates lanes round-robin", () => {
    const s = new LaneScheduler("followup");
    for (const t of ["a1", "a2", "a3"]) s.add(entry("A", t));
    s.add(entry("B", "b1"));
    const t1 = s.take();
    expect(texts(t1)).toEqual(["a1"]);
    expect(texts(s.take())).toEqual(["b1"]);
    // A is busy: nothing else can start.
    expect(s.take()).toBeNull();
    s.add(entry("B", "b2"));
    s.release("A");
    s.release("B");
    // A was released first, so it is ahead of B in the ring.
    expect(texts(s.take())).toEqual(["a2"]);
    expect(texts(s.take())).toEqual(["b2"]);
    expect(s.info("A")).toEqual({ pending: 1, activeRunId: expect.stringContaining("a2") });
  });

  it("does not take an entry before it is durable, and keeps call order", () => {
    const s = new LaneScheduler("followup");
    const first = entry("A", "first", {}, false);
    const second = entry("A", "second");
    s.add(first);
    s.add(second);
    expect(s.take()).toBeNull();
    expect(s.info("A").pending).toBe(2);
    s.markDurable(first);
    expect(texts(s.take())).toEqual(["first"]);
  });

  it("skips removed entries and frees the lane when the head is removed", () => {
    const s = new LaneScheduler("followup");
    const blocker = entry("A", "blocker", {}, false);
    const next = entry("A", "next");
    s.add(blocker);
    s.add(next);
    expect(s.remove(blocker)).toBe(true);
    expect(s.remove(blocker)).toBe(false);
    expect(texts(s.take())).toEqual(["next"]);
    s.release("A");
    expect(s.info("A")).toEqual({ pending: 0 });
  });

  it("collect mode folds the collectable run at the head and stops at the first other message", () => {
    const s = new LaneScheduler("collect");
    s.add(entry("A", "m1"));
    const removed = entry("A", "gone");
    s.add(removed);
    s.add(entry("A", "m2"));
    s.add(entry("A", "a2a", { origin: "a2a" }));
    s.add(entry("A", "m3"));
    s.remove(removed);
    expect(texts(s.take())).toEqual(["m1", "m2"]);
    s.release("A");
    expect(texts(s.take())).toEqual(["a2a"]);
    s.release("A");
    expect(texts(s.take())).toEqual(["m3"]);
  });

  it("collect mode does not fold a message that is not durable yet", () => {
    const s = new LaneScheduler("collect");
    s.add(entry("A", "m1"));
    const late = entry("A", "m2", {}, false);
    s.add(late);
    expect(texts(s.take())).toEqual(["m1"]);
    s.release("A");
    expect(s.take()).toBeNull();
    s.markDurable(late);
    expect(texts(s.take())).toEqual(["m2"]);
  });

  it("stays correct through long queues (internal array compaction)", () => {
    const s = new LaneScheduler("followup");
    for (let i = 0; i < 5000; i++) s.add(entry("A", `${i}`));
    for (let i = 0; i < 5000; i++) {
      expect(texts(s.take())).toEqual([`${i}`]);
      s.release("A");
    }
    expect(s.take()).toBeNull();
    expect(s.info("A")).toEqual({ pending: 0 });
  });
});
