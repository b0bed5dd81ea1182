/**
 * A set that remembers the order its keys were (last) added in and gives up its oldest in O(1):
 * the bounded caches and "newest N" retentions use it to evict.
 *
 * Why not a plain Map or Set, whose iteration order is insertion order too: V8 leaves a hole in
 * the table for every deleted entry until the table is rebuilt, and `keys().next()` walks over
 * those holes. Evicting the oldest entry of a full table again and again piles the holes up at
 * its front, so each eviction walks tens of thousands of them (measured here: 19 µs per
 * eviction at 20k entries, 30–75 µs at 50k — a cache of unit estimates evicting hundreds per
 * turn slowed a busy gateway to 50 turns/s). Here the order lives in an array with a moving
 * head; a key added again or deleted leaves a stale slot behind, skipped and compacted away.
 */
export class OrderedSet<K> implements Iterable<K> {
  /** Each live key's stamp: the slot holding this stamp is its place in the order. */
  readonly #stamp = new Map<K, number>();
  #keys: K[] = [];
  #stamps: number[] = [];
  #head = 0;
  #next = 0;

  get size(): number {
    return this.#stamp.size;
  }

  has(key: K): boolean {
    return this.#stamp.has(key);
  }

  /** Adds `key` as the newest (a key already held moves to the newest place). */
  add(key: K): this {
    const s = this.#next++;
    this.#stamp.set(key, s);
    this.#keys.push(key);
    this.#stamps.push(s);
    this.#compact();
    return this;
  }

  delete(key: K): boolean {
    if (!this.#stamp.delete(key)) return false;
    this.#compact();
    return true;
  }

  /** Removes and returns the oldest key; undefined when empty. */
  shift(): K | undefined {
    while (this.#head < this.#keys.length) {
      const i = this.#head++;
      const key = this.#keys[i] as K;
      if (this.#stamp.get(key) === this.#stamps[i]) {
        this.#stamp.delete(key);
        this.#compact();
        return key;
      }
    }
    return undefined;
  }

  /** The oldest key without removing it. */
  oldest(): K | undefined {
    for (let i = this.#head; i < this.#keys.length; i++) {
      const key = this.#keys[i] as K;
      if (this.#stamp.get(key) === this.#stamps[i]) {
        this.#head = i; // the slots before it are stale
        return key;
      }
    }
    return undefined;
  }

  clear(): void {
    this.#stamp.clear();
    this.#keys = [];
    this.#stamps = [];
    this.#head = 0;
  }

  /** Oldest first. */
  *[Symbol.iterator](): Iterator<K> {
    for (let i = this.#head; i < this.#keys.length; i++) {
      const key = this.#keys[i] as K;
      if (this.#stamp.get(key) === this.#stamps[i]) yield key;
    }
  }

  /** Slots held, live and stale (never more than about twice the keys, plus a little). */
  slots(): number {
    return this.#keys.length - this.#head;
  }

  /**
   * Drops stale slots once they outnumber the live keys, and the consumed ones before the head
   * once they outnumber the rest (each rebuild is paid for by as many operations: amortised O(1)).
   */
  #compact(): void {
    const slots = this.#keys.length - this.#head;
    if (slots <= 2 * this.#stamp.size + 32 && (this.#head <= 32 || this.#head <= slots)) return;
    const keys: K[] = [];
    const stamps: number[] = [];
    for (let i = this.#head; i < this.#keys.length; i++) {
      const key = this.#keys[i] as K;
      const s = this.#stamps[i] as number;
      if (this.#stamp.get(key) === s) {
        keys.push(key);
        stamps.push(s);
      }
    }
    this.#keys = keys;
    this.#stamps = stamps;
    this.#head = 0;
  }
}

/**
 * A Map holding at most `max` entries: `set` makes an entry the newest, `touch` marks one
 * recently used, and past `max` the oldest go (evicted through an OrderedSet, in O(1)).
 */
export class BoundedMap<K, V> {
  readonly #values = new Map<K, V>();
  readonly #order = new OrderedSet<K>();

  constructor(readonly max: number) {}

  get size(): number {
    return this.#values.size;
  }

  get(key: K): V | undefined {
    return this.#values.get(key);
  }

  has(key: K): boolean {
    return this.#values.has(key);
  }

  /** Sets `key` as the newest entry; the oldest beyond `max` are dropped. */
  set(key: K, value: V): this {
    this.#values.set(key, value);
    this.#order.add(key);
    while (this.#values.size > this.max) {
      const oldest = this.#order.shift();
      if (oldest === undefined) break;
      this.#values.delete(oldest);
    }
    return this;
  }

  /** Marks a held key as the newest (recently used); a no-op for a key not held. */
  touch(key: K): void {
    if (this.#values.has(key)) this.#order.add(key);
  }

  delete(key: K): boolean {
    this.#order.delete(key);
    return this.#values.delete(key);
  }

  clear(): void {
    this.#values.clear();
    this.#order.clear();
  }
}
