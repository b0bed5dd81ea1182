/**
 * A sorted list as a run of small sorted buckets (each ≤ `maxBucket` items): insert and
 * remove cost two binary searches and a splice of at most one bucket, so a burst of
 * out-of-order updates stays cheap at 100,000+ items, and walking from the largest item down
 * can stop early. Items are located by comparison, so the order must be total (no ties
 * between distinct items).
 */
export class SortedList<T> {
  private buckets: T[][] = [];
  private count = 0;

  constructor(
    private readonly cmp: (a: T, b: T) => number,
    private readonly maxBucket = 512,
  ) {}

  /** Builds from items already sorted ascending by `cmp`. */
  static fromSorted<T>(items: readonly T[], cmp: (a: T, b: T) => number, maxBucket = 512): SortedList<T> {
    const list = new SortedList(cmp, maxBucket);
    const fill = Math.max(1, maxBucket >> 1); // half-full buckets absorb inserts before splitting
    for (let i = 0; i < items.length; i += fill) list.buckets.push(items.slice(i, i + fill));
    list.count = items.length;
    return list;
  }

  /**
   * Appends an item no smaller than any already in the list (bulk loading in sorted order),
   * filling buckets half-way so later inserts do not split at once.
   */
  appendMax(item: T): void {
    const n = this.buckets.length;
    const last = this.buckets[n - 1];
    const fill = Math.max(1, this.maxBucket >> 1);
    if (last !== undefined && last.length < fill) {
      last.push(item);
      // a full bucket is copied to its exact size: grown by push it holds about a third more
      // room than items (at a million items in three lists, ~8 MB)
      if (last.length === fill) this.buckets[n - 1] = last.slice();
    } else this.buckets.push([item]);
    this.count++;
  }

  get size(): number {
    return this.count;
  }

  insert(item: T): void {
    this.count++;
    if (this.buckets.length === 0) {
      this.buckets.push([item]);
      return;
    }
    const bi = Math.min(this.bucketFor(item), this.buckets.length - 1);
    const b = this.buckets[bi]!;
    const last = b[b.length - 1];
    if (last === undefined || this.cmp(last, item) < 0) b.push(item);
    else b.splice(this.lowerBound(b, item), 0, item);
    if (b.length > this.maxBucket) this.buckets.splice(bi + 1, 0, b.splice(b.length >> 1));
  }

  /** Removes this exact item (found by its sort position); false when it is not there. */
  remove(item: T): boolean {
    const bi = this.bucketFor(item);
    const b = this.buckets[bi];
    if (!b) return false;
    const i = this.lowerBound(b, item);
    if (b[i] !== item) return false;
    b.splice(i, 1);
    if (b.length === 0) this.buckets.splice(bi, 1);
    this.count--;
    return true;
  }

  /** Visits items from the largest down until `fn` returns false. */
  forEachDesc(fn: (item: T) => boolean | undefined): void {
    for (let bi = this.buckets.length - 1; bi >= 0; bi--) {
      const b = this.buckets[bi]!;
      for (let i = b.length - 1; i >= 0; i--) if (fn(b[i]!) === false) return;
    }
  }

  toArray(): T[] {
    return this.buckets.flat();
  }

  /** Index of the first bucket whose last item is ≥ item (buckets.length when none). */
  private bucketFor(item: T): number {
    let lo = 0;
    let hi = this.buckets.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const b = this.buckets[mid]!;
      if (this.cmp(b[b.length - 1]!, item) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private lowerBound(b: T[], item: T): number {
    let lo = 0;
    let hi = b.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.cmp(b[mid]!, item) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
