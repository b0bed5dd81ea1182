import { describe, expect, it } from "vitest";
import { BoundedMap, OrderedSet } from "../../src/ordered-set.js";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe("OrderedSet", () => {
  it("keeps insertion order (re-adding moves a key to the newest place) and shifts the oldest", () => {
    const s = new OrderedSet<string>();
    s.add("a").add("b").add("c").add("a");
    expect([...s]).toEqual(["b", "c", "a"]);
    expect(s.oldest()).toBe("b");
    expect(s.delete("c")).toBe(true);
    expect(s.delete("c")).toBe(false);
    expect(s.shift()).toBe("b");
    expect(s.shift()).toBe("a");
    expect(s.shift()).toBeUndefined();
    expect(s.size).toBe(0);
  });

  it("behaves like a Set used as a queue, over 20,000 random operations, with bounded slots", () => {
    const random = rng(7);
    const s = new OrderedSet<number>();
    const ref = new Set<number>(); // the reference: a JS Set's order is insertion order
    let maxSlots = 0;
    for (let i = 0; i < 20_000; i++) {
      const k = Math.floor(random() * 300);
      const op = random();
      if (op < 0.45) {
        ref.delete(k);
        ref.add(k);
        s.add(k);
      } else if (op < 0.65) {
        expect(s.delete(k)).toBe(ref.delete(k));
      } else if (op < 0.9) {
        const want = ref.values().next();
        if (!want.done) ref.delete(want.value);
        expect(s.shift()).toBe(want.done ? undefined : want.value);
      } else {
        expect(s.oldest()).toBe(ref.values().next().value);
      }
      expect(s.size).toBe(ref.size);
      expect(s.has(k)).toBe(ref.has(k));
      maxSlots = Math.max(maxSlots, s.slots());
      if (i % 997 === 0) expect([...s]).toEqual([...ref]);
    }
    expect([...s]).toEqual([...ref]);
    expect(maxSlots).toBeLessThanOrEqual(2 * 300 + 33);
  });

  it("a bounded FIFO of 50,000 keys evicting one per insert holds no more than it must", () => {
    const s = new OrderedSet<number>();
    let wrong = 0;
    for (let i = 0; i < 200_000; i++) {
      s.add(i);
      if (s.size > 50_000 && s.shift() !== i - 50_000) wrong++;
    }
    expect(wrong).toBe(0);
    expect(s.size).toBe(50_000);
    expect(s.oldest()).toBe(150_000);
    expect(s.slots()).toBe(50_000);
  });
});

describe("BoundedMap", () => {
  it("holds at most max entries, dropping the least recently set or touched", () => {
    const m = new BoundedMap<string, number>(3);
    m.set("a", 1).set("b", 2).set("c", 3);
    m.touch("a"); // b is now the oldest
    m.touch("zz"); // not held: nothing changes
    m.set("d", 4);
    expect(m.get("b")).toBeUndefined();
    expect([m.get("a"), m.get("c"), m.get("d"), m.size]).toEqual([1, 3, 4, 3]);
    m.set("c", 30); // replacing makes it the newest: a is the oldest
    m.set("e", 5);
    expect(m.get("a")).toBeUndefined();
    expect(m.get("c")).toBe(30);
    expect(m.delete("c")).toBe(true);
    m.set("f", 6).set("g", 7); // c's deletion left room for one: d goes
    expect([m.get("d"), m.get("e"), m.get("f"), m.get("g"), m.size]).toEqual([undefined, 5, 6, 7, 3]);
    m.clear();
    expect(m.size).toBe(0);
  });
});
