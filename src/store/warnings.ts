import type { Logger } from "../log.js";

/**
 * Problems a store driver found while reading (torn lines, unparseable records, a stream entry
 * without its message). Each distinct message is logged once and kept for `warnings()` (health,
 * doctor); the list is bounded.
 */
export class WarningSink {
  private readonly seen = new Set<string>();
  private readonly list: string[] = [];

  constructor(
    private readonly logger: Logger,
    private readonly max = 200,
  ) {}

  add(message: string, fields: Record<string, unknown> = {}): void {
    if (this.seen.has(message)) return;
    this.seen.add(message);
    this.list.push(message);
    if (this.list.length > this.max) {
      const dropped = this.list.shift();
      if (dropped !== undefined) this.seen.delete(dropped);
    }
    this.logger.warn(fields, message);
  }

  all(): string[] {
    return [...this.list];
  }
}
