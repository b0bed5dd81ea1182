import { describe, expect, it } from "vitest";
import { SortedList } from "../../../../src/store/fs/sorted-list.js";

interface Item {
  at: number;
  id: number;
}
const cmp = (a: Item, b: Item) => a.at - b.at || a.id - b.id;

/** A deterministic PRNG so a failure reproduces. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function desc(list: SortedList<Item>, limit = Number.POSITIVE_INFINITY): Item[] {
  const out: Item[] = [];
  list.forEachDesc((x) => {
    out.push(x);
    return out.length < limit;
  });
  return out;
}

describe("SortedList", () => {
  it("matches a reference sort through random inserts, updates and removals (small buckets)", () => {
    const rand = rng(42);
    const list = new SortedList<Item>(cmp, 8);
    const live = new Map<number, Item>();
    for (let step = 0; step < 5000; step++) {
      const id = Math.floor(rand() * 400);
      const cur = live.get(id);
      const r = rand();
      if (cur && r < 0.3) {
        expect(list.remove(cur)).toBe(true);
        live.delete(id);
      } else {
        if (cur) expect(list.remove(cur)).toBe(true);
        const next = { at: Math.floor(rand() * 50), id }; // many equal `at`: ties broken by id
        list.insert(next);
        live.set(id, next);
      }
      if (step % 250 === 0) expect(list.toArray()).toEqual([...live.values()].sort(cmp));
    }
    const expected = [...live.values()].sort(cmp);
    expect(list.size).toBe(expected.length);
    expect(list.toArray()).toEqual(expected);
    expect(desc(list)).toEqual([...expected].reverse());
    expect(desc(list, 5)).toEqual([...expected].reverse().slice(0, 5));
  });

  it("removes only the identical item and reports absent ones", () => {
    const list = new SortedList<Item>(cmp, 4);
    const a = { at: 1, id: 1 };
    list.insert(a);
    expect(list.remove({ at: 1, id: 1 })).toBe(false);
    expect(list.remove({ at: 9, id: 9 })).toBe(false);
    expect(list.remove(a)).toBe(true);
    expect(list.remove(a)).toBe(false);
    expect(list.size).toBe(0);
    expect(desc(list)).toEqual([]);
  });

  it("builds from sorted input and keeps accepting inserts anywhere", () => {
    const items = Array.from({ length: 1000 }, (_, i) => ({ at: i * 2, id: i }));
    const list = SortedList.fromSorted(items, cmp, 16);
    const extra = [
      { at: -1, id: 5000 },
      { at: 999, id: 5001 },
      { at: 5000, id: 5002 },
    ];
    for (const x of extra) list.insert(x);
    expect(list.toArray()).toEqual([...items, ...extra].sort(cmp));
    expect(list.size).toBe(1003);
  });
});

describe("SortedList.appendMax", () => {
  it("bulk-appends in order and then behaves like any list", () => {
    const list = new SortedList<Item>(cmp, 8);
    for (let i = 0; i < 100; i++) list.appendMax({ at: i, id: i });
    list.insert({ at: 50, id: 1000 });
    expect(list.remove({ at: 3, id: 3 })).toBe(false); // a copy is not the stored item
    expect(list.size).toBe(101);
    expect(list.toArray().map((x) => x.id)).toEqual([
      ...Array.from({ length: 51 }, (_, i) => i),
      1000,
      ...Array.from({ length: 49 }, (_, i) => i + 51),
    ]);
  });
});
