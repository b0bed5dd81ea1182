import { SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";

/**
 * Problems found while reading stored records (unparseable JSON, a stream entry without its
 * message). Each distinct message is logged once and kept for `warnings()`; the list is bounded.
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

/** Throws once a part of the store was closed. */
export function assertOpen(closed: boolean, part: string): void {
  if (closed) throw new SwitchboardError("UNAVAILABLE", `redis store is closed (${part})`);
}
