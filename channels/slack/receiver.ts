import type { App, Receiver } from "@slack/bolt";

/**
 * A Bolt receiver that does no I/O itself: the adapter verifies HTTP requests (or reads the
 * Socket Mode connection) and calls `dispatch`, which runs the body through Bolt's middleware
 * and listeners and reports whether every listener accepted it. That lets the adapter answer
 * Slack (HTTP 200 / Socket Mode ack) only after the inbound handler accepted the event —
 * Bolt's own receivers acknowledge events before any listener runs.
 */
export class DispatchReceiver implements Receiver {
  private app: App | undefined;
  private readonly failures = new WeakMap<object, unknown[]>();

  init(app: App): void {
    this.app = app;
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }

  /** Resolves with the first listener failure for this body, or undefined when all succeeded. */
  async dispatch(body: Record<string, unknown>, retryNum?: number, retryReason?: string): Promise<unknown> {
    if (!this.app) throw new Error("slack receiver used before the Bolt app was created");
    const failures: unknown[] = [];
    this.failures.set(body, failures);
    await this.app.processEvent({
      body,
      // Acknowledgement is the caller's job, after this promise settles.
      ack: async () => undefined,
      ...(retryNum !== undefined ? { retryNum } : {}),
      ...(retryReason ? { retryReason } : {}),
    });
    return failures[0];
  }

  /** Listeners call this (with the body object Bolt handed them) instead of throwing. */
  reportFailure(body: object, err: unknown): void {
    this.failures.get(body)?.push(err);
  }
}
