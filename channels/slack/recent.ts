/** A bounded set of recently seen keys (oldest evicted first), for retry and duplicate suppression. */
export class RecentKeys {
  private readonly keys = new Map<string, true>();
  constructor(private readonly max: number) {}

  has(key: string): boolean {
    return this.keys.has(key);
  }

  add(key: string): void {
    this.keys.delete(key);
    this.keys.set(key, true);
    if (this.keys.size > this.max) {
      const oldest = this.keys.keys().next().value;
      if (oldest !== undefined) this.keys.delete(oldest);
    }
  }

  delete(key: string): void {
    this.keys.delete(key);
  }
}
