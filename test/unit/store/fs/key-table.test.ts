import { describe, expect, it } from "vitest";
import { KeyTable } from "../../../../src/store/fs/key-table.js";

interface E {
  key: string;
  v: number;
}

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** The table agrees with a Map on everything it offers: lookups, size and insertion order. */
function agree(t: KeyTable<E>, m: Map<string, E>, probe: string[]): void {
  expect(t.size).toBe(m.size);
  expect(t.values()).toEqual([...m.values()]);
  for (const k of probe) {
    expect(t.get(k)).toBe(m.get(k));
  }
}

describe("KeyTable", () => {
  it("agrees with a Map through random sets, replaces and deletes (order, size, lookups)", () => {
    for (const seed of [1, 2, 3]) {
      const rand = rng(seed);
      const t = new KeyTable<E>();
      const m = new Map<string, E>();
      // few distinct keys against many operations: replaces, deletes and re-adds all happen often
      const keys = Array.from({ length: 300 }, (_, i) => `agent:main:telegram:dm:${i * 7919}`);
      for (let op = 0; op < 6000; op++) {
        const key = keys[Math.floor(rand() * keys.length)]!;
        const r = rand();
        if (r < 0.55) {
          const e = { key, v: op };
          expect(t.set(e)).toBe(m.get(key));
          m.set(key, e);
        } else {
          expect(t.delete(key)).toBe(m.get(key));
          m.delete(key);
        }
        if (op % 500 === 0) agree(t, m, keys);
      }
      agree(t, m, [...keys, "absent", ""]);
    }
  });

  it("keeps a replaced entry in its place and puts a re-added one last, as a Map does", () => {
    const t = new KeyTable<E>();
    for (const key of ["a", "b", "c"]) t.set({ key, v: 0 });
    t.set({ key: "a", v: 1 });
    expect(t.values().map((e) => `${e.key}${e.v}`)).toEqual(["a1", "b0", "c0"]);
    t.delete("a");
    t.set({ key: "a", v: 2 });
    expect(t.values().map((e) => `${e.key}${e.v}`)).toEqual(["b0", "c0", "a2"]);
  });

  it("sweeps the holes deletes leave, keeping order and lookups (a churned table does not grow)", () => {
    const t = new KeyTable<E>();
    const m = new Map<string, E>();
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 1000; i++) {
        const e = { key: `k${round}:${i}`, v: i };
        t.set(e);
        m.set(e.key, e);
      }
      for (let i = 0; i < 1000; i++) {
        if (i % 10 === 0) continue; // a tenth of each round stays
        t.delete(`k${round}:${i}`);
        m.delete(`k${round}:${i}`);
      }
    }
    agree(t, m, ["k0:0", "k0:1", "k19:990", "k19:991", "k5:500"]);
    expect(t.size).toBe(2000);
  });

  it("holds a hundred thousand keys sized up front or grown, and clears", () => {
    const grown = new KeyTable<E>();
    const reserved = new KeyTable<E>();
    reserved.reserve(100_000);
    for (let i = 0; i < 100_000; i++) {
      grown.set({ key: `s${i}`, v: i });
      reserved.set({ key: `s${i}`, v: i });
    }
    for (const t of [grown, reserved]) {
      expect(t.size).toBe(100_000);
      for (let i = 0; i < 100_000; i += 997) expect(t.get(`s${i}`)?.v).toBe(i);
      expect(t.get("s100000")).toBeUndefined();
      expect(t.values()[99_999]?.key).toBe("s99999");
    }
    grown.clear();
    expect(grown.size).toBe(0);
    expect(grown.get("s1")).toBeUndefined();
    expect(grown.values()).toEqual([]);
    grown.set({ key: "s1", v: 1 });
    expect(grown.get("s1")?.v).toBe(1);
  });

  it("tells apart keys that differ only in code units above ASCII", () => {
    const t = new KeyTable<E>();
    const keys = ["dm:é", "dm:ê", "dm:\u{1f600}", "dm:\u{1f601}", "dm:\ud800", "dm:\udc00"];
    for (const [v, key] of keys.entries()) t.set({ key, v });
    for (const [v, key] of keys.entries()) expect(t.get(key)?.v).toBe(v);
  });
});
