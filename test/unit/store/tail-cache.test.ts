import { describe, expect, it } from "vitest";
import { TailCache } from "../../../src/store/tail-cache.js";
import type { TranscriptMessage } from "../../../src/store/types.js";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const msg = (id: string): TranscriptMessage => ({
  id,
  sessionId: "s",
  role: "user",
  content: "x",
  timestamp: 1,
});

/** Reads each of `files` in turn, filling the entry from "disk" on a miss; returns the hit share. */
function cycle(cache: TailCache, files: string[], rounds: number): number {
  let hits = 0;
  let reads = 0;
  for (let r = 0; r < rounds; r++) {
    for (const f of files) {
      reads++;
      if (cache.read(f, 1, true) !== null) hits++;
      else cache.set(f, [msg(`${f}:m`)], [100], true);
    }
  }
  return hits / reads;
}

describe("TailCache eviction", () => {
  const limits = { maxLinesPerFile: 10, maxCharsPerFile: 1000, maxChars: 100 * 200 }; // 200 files fit

  it("keeps a share of the files when more than fit are used in turn (strict LRU would miss every read)", () => {
    const files = Array.from({ length: 256 }, (_, i) => `f${i}`);
    const cache = new TailCache(limits, rng(3));
    const share = cycle(cache, files, 20);
    expect(share).toBeGreaterThan(0.2);
    // random() = 0 always picks the oldest: strict LRU, which misses every read of the cycle
    expect(cycle(new TailCache(limits, () => 0), files, 20)).toBe(0);
    expect(cache.stats().chars).toBeLessThanOrEqual(limits.maxChars);
    expect(cache.stats().files).toBeLessThanOrEqual(200);
  });

  it("never drops a recently used file: a hot file read between every cold one always hits", () => {
    const cache = new TailCache(limits, rng(5));
    cache.set("hot", [msg("hot:m")], [100], true);
    let hotMisses = 0;
    for (let i = 0; i < 5000; i++) {
      if (cache.read("hot", 1, true) === null) {
        hotMisses++;
        cache.set("hot", [msg("hot:m")], [100], true);
      }
      const cold = `cold${i}`;
      if (cache.read(cold, 1, true) === null) cache.set(cold, [msg(`${cold}:m`)], [100], true);
    }
    expect(hotMisses).toBe(0);
    expect(cache.stats().chars).toBeLessThanOrEqual(limits.maxChars);
  });

  it("with everything fitting, nothing is dropped", () => {
    const files = Array.from({ length: 150 }, (_, i) => `f${i}`);
    const cache = new TailCache(limits, rng(7));
    expect(cycle(cache, files, 10)).toBeCloseTo(0.9, 5); // only the first round misses
  });
});

describe("TailCache.hasId", () => {
  it("answers for the messages it holds, as they are appended and trimmed away", () => {
    const cache = new TailCache({ maxLinesPerFile: 4, maxCharsPerFile: 10_000, maxChars: 100_000 });
    expect(cache.hasId("f", "a")).toBeNull(); // no entry: cannot tell
    cache.set("f", [msg("a"), msg("b")], [10, 10], true);
    expect(cache.hasId("f", "a")).toBe(true);
    expect(cache.hasId("f", "z")).toBe(false);
    for (const id of ["c", "d", "e", "a2"]) cache.append("f", msg(id), 10); // a, b trimmed off
    expect(cache.hasId("f", "a")).toBe(false);
    expect(cache.hasId("f", "b")).toBe(false);
    expect(cache.hasId("f", "e")).toBe(true);
    // an id held twice (a legacy file) stays known until its last copy is trimmed
    cache.append("f", msg("e"), 10); // holds d, e, a2, e
    cache.append("f", msg("f"), 10); // holds e, a2, e, f
    expect(cache.hasId("f", "d")).toBe(false);
    expect(cache.hasId("f", "e")).toBe(true);
    cache.append("f", msg("g"), 10); // a2, e, f, g
    expect(cache.hasId("f", "e")).toBe(true);
    cache.append("f", msg("h"), 10); // e, f, g, h
    cache.append("f", msg("i"), 10); // f, g, h, i
    expect(cache.hasId("f", "e")).toBe(false);
    expect(cache.hasId("f", "i")).toBe(true);
  });
});

describe("TailCache reads", () => {
  it("serve the newest `limit` messages passing the filter, shared or copied, or null when the entry cannot tell", () => {
    const rnd = rng(99);
    const roles: TranscriptMessage["role"][] = ["user", "assistant", "toolCall", "toolResult"];
    for (let round = 0; round < 200; round++) {
      const cache = new TailCache({ maxLinesPerFile: 1000, maxCharsPerFile: 1e6, maxChars: 1e7 });
      const n = Math.floor(rnd() * 40);
      const msgs = Array.from({ length: n }, (_, i) => ({
        ...msg(`m${i}`),
        role: roles[Math.floor(rnd() * roles.length)]!,
      }));
      const complete = rnd() < 0.5;
      cache.set("f", msgs.slice(), new Array<number>(n).fill(10), complete);
      const limit = 1 + Math.floor(rnd() * 45);
      for (const includeTools of [true, false]) {
        const passing = msgs.filter(
          (m) => includeTools || (m.role !== "toolCall" && m.role !== "toolResult"),
        );
        const want = passing.length < limit && !complete ? null : passing.slice(-limit).map((m) => m.id);
        for (const shared of [true, false]) {
          const got = cache.read("f", limit, includeTools, shared);
          expect(got?.map((m) => m.id) ?? null).toEqual(want);
          if (got && got.length > 0) expect(got[got.length - 1] === passing[passing.length - 1]).toBe(shared);
        }
      }
    }
  });
});

describe("TailCache heap sharing", () => {
  const limits = { maxLinesPerFile: 100, maxCharsPerFile: 100_000, maxChars: 1_000_000 };
  /** As JSON.parse returns a line: every message with its own strings and objects. */
  const parsed = (id: string, provenance?: TranscriptMessage["provenance"]): TranscriptMessage =>
    JSON.parse(JSON.stringify({ ...msg(id), ...(provenance ? { provenance } : {}) }));
  const human = { kind: "external_user" as const, channel: "telegram", senderId: "42" };
  const agent = {
    kind: "inter_session" as const,
    sourceSessionKey: "agent:main:main",
    sourceTool: "sessions_send",
  };

  it("equal provenances of a file's messages are one object, on fill and on append; copies stay independent", () => {
    const cache = new TailCache(limits);
    cache.set(
      "f",
      [parsed("a", human), parsed("b"), parsed("c", human), parsed("d", agent)],
      [10, 10, 10, 10],
      true,
    );
    cache.append("f", parsed("e", agent), 10);
    cache.append("f", parsed("g", { ...human, senderName: "Ann" }), 10);
    cache.append("f", parsed("h", human), 10);
    const got = cache.read("f", 10, true, true)!;
    const prov = (id: string) => got.find((m) => m.id === id)!.provenance;
    expect(prov("c")).toBe(prov("a"));
    expect(prov("e")).toBe(prov("d"));
    expect(prov("d")).not.toBe(prov("a"));
    expect(prov("g")).toEqual({ ...human, senderName: "Ann" }); // a different one is not folded in
    expect(prov("h")).toEqual(human);
    expect(prov("h")).not.toBe(prov("g"));
    // A read that copies gets objects of its own: changing one leaves the cache and the others alone.
    const copy = cache.read("f", 10, true)!;
    copy[0]!.provenance!.senderId = "changed";
    expect(copy[2]!.provenance!.senderId).toBe("42");
    expect(cache.read("f", 10, true, true)![2]!.provenance!.senderId).toBe("42");
  });
});
