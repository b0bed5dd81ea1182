import { randomInt } from "node:crypto";
import { FNV_BASIS, fnv1a } from "../../hash.js";

/** What a KeyTable holds: anything with a string key. */
export interface Keyed {
  readonly key: string;
}

const EMPTY = 0;
const DELETED = -1;
/** Never fuller than this (live plus deleted slots): probes stay short. */
const MAX_LOAD = 0.5;
/** Per process: the slot a key lands in is not predictable from outside (keys come from platforms). */
const SEED = randomInt(0x7fffffff);

/**
 * A string-keyed table of entries in insertion order — the part of a `Map<string, T>` the session
 * index uses (get, set, delete, size, values in insertion order) — kept in typed arrays.
 *
 * Why not a Map: at a million keys, filling a Map at open was the largest cost left (about 40% of
 * a 3.5 s open): its backing store is rehashed into a new heap array at every doubling and each
 * insert touches scattered memory. Here a slot is two int32s (entry index + 1, and the key's hash),
 * the entries are one dense array, and a table sized up front (`reserve`) never rehashes; a
 * probe compares the stored hash before it touches a key.
 *
 * Deleting leaves a hole in the entries (iteration skips it) and a tombstone in the slots; both
 * are swept when they are more than half of what is held.
 */
export class KeyTable<T extends Keyed> {
  /** Pairs: [entry index + 1 (0 empty, -1 deleted), key hash]. */
  private slots = new Int32Array(2 * 16);
  private mask = 15;
  /** Slots not empty (live or deleted). */
  private used = 0;
  private items: Array<T | undefined> = [];
  private live = 0;

  get size(): number {
    return this.live;
  }

  /** Makes room for `n` more entries, so adding up to that many never rehashes. */
  reserve(n: number): void {
    if ((this.used + n) / (this.mask + 1) > MAX_LOAD) this.rebuild(this.live + n);
  }

  get(key: string): T | undefined {
    const p = this.find(key, keyHash(key));
    return p < 0 ? undefined : this.items[this.slots[p]! - 1];
  }

  /** Adds or replaces (a replaced entry keeps its place in the order, as in a Map); returns the replaced one. */
  set(entry: T): T | undefined {
    const h = keyHash(entry.key);
    const found = this.find(entry.key, h);
    if (found >= 0) {
      const i = this.slots[found]! - 1;
      const old = this.items[i];
      this.items[i] = entry;
      return old;
    }
    if ((this.used + 1) / (this.mask + 1) > MAX_LOAD) this.rebuild(this.live + 1);
    this.items.push(entry);
    this.live++;
    this.place(this.items.length, h);
    return undefined;
  }

  /** Removes `key`'s entry and returns it. */
  delete(key: string): T | undefined {
    const p = this.find(key, keyHash(key));
    if (p < 0) return undefined;
    const i = this.slots[p]! - 1;
    const old = this.items[i];
    this.items[i] = undefined;
    this.slots[p] = DELETED;
    this.live--;
    // sweep once holes outnumber entries (amortised: at least as many deletes came first)
    if (this.items.length > 64 && this.live < this.items.length / 2) this.rebuild(this.live);
    return old;
  }

  clear(): void {
    this.slots = new Int32Array(2 * 16);
    this.mask = 15;
    this.used = 0;
    this.items = [];
    this.live = 0;
  }

  /** The entries in insertion order (a new array). */
  values(): T[] {
    if (this.live === this.items.length) return this.items.slice() as T[];
    const out: T[] = [];
    for (const e of this.items) if (e !== undefined) out.push(e);
    return out;
  }

  /** The slot holding `key`, or -1. */
  private find(key: string, h: number): number {
    const slots = this.slots;
    const mask = this.mask;
    for (let p = h & mask; ; p = (p + 1) & mask) {
      const s = slots[2 * p]!;
      if (s === EMPTY) return -1;
      if (s !== DELETED && slots[2 * p + 1] === h && this.items[s - 1]!.key === key) return 2 * p;
    }
  }

  /** Puts entry number `idx1` (index + 1) with hash `h` in the first free slot of its probe. */
  private place(idx1: number, h: number): void {
    const slots = this.slots;
    const mask = this.mask;
    let p = h & mask;
    while (slots[2 * p] !== EMPTY) p = (p + 1) & mask;
    slots[2 * p] = idx1;
    slots[2 * p + 1] = h;
    this.used++;
  }

  /** New slots for at least `n` entries; compacts the entries (drops holes) and the tombstones. */
  private rebuild(n: number): void {
    let cap = 16;
    while (n / cap > MAX_LOAD) cap *= 2;
    const old = this.slots;
    // with holes, the entries' new indices (holes dropped), read through the old slots
    let moved: Int32Array | null = null;
    if (this.live < this.items.length) {
      moved = new Int32Array(this.items.length + 1);
      const items: T[] = [];
      for (let i = 0; i < this.items.length; i++) {
        const e = this.items[i];
        if (e === undefined) continue;
        items.push(e);
        moved[i + 1] = items.length;
      }
      this.items = items;
    }
    this.slots = new Int32Array(2 * cap);
    this.mask = cap - 1;
    this.used = 0;
    for (let p = 0; p < old.length; p += 2) {
      const s = old[p]!;
      if (s > 0) this.place(moved === null ? s : moved[s]!, old[p + 1]!);
    }
  }
}

/** FNV-1a from a per-process seed, then murmur3's finaliser (every bit reaches the low ones the mask keeps). */
function keyHash(s: string): number {
  let h = fnv1a(s, FNV_BASIS ^ SEED);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
