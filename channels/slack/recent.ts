import { BoundedMap } from "../../src/ordered-set.js";

/** A bounded set of recently seen keys (oldest evicted first), for retry and duplicate suppression. */
export class RecentKeys {
  private readonly keys: BoundedMap<string, true>;
  constructor(max: number) {
    this.keys = new BoundedMap(max);
  }

  has(key: string): boolean {
    return this.keys.has(key);
  }

  add(key: string): void {
    this.keys.set(key, true);
  }

  delete(key: string): void {
    this.keys.delete(key);
  }
}
