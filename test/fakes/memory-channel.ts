import type {
  ActionHandler,
  AdapterContext,
  ChannelAdapter,
  ChannelCapabilities,
  ChannelStatus,
  EditMessage,
  InboundHandler,
  InboundMessage,
  OutboundMessage,
} from "../../src/channels/types.js";
import { type InboundAction, inboundActionSchema, inboundMessageSchema } from "../../src/channels/types.js";
import { RateLimitedError } from "../../src/errors.js";

/**
 * An in-memory channel adapter for pipeline/delivery/router tests: records everything sent,
 * lets a test inject inbound messages, and can be told to rate-limit or fail the next sends.
 */
export class MemoryChannel implements ChannelAdapter {
  readonly sent: OutboundMessage[] = [];
  readonly typing: Array<{ to: string; threadId?: string }> = [];
  readonly threads: Array<{ to: string; title: string; threadId: string }> = [];
  /** Edits of sent messages (approval requests after their decision). */
  readonly edits: EditMessage[] = [];
  #onInbound: InboundHandler | null = null;
  #onAction: ActionHandler | null = null;
  #state: ChannelStatus = "stopped";
  #failures: Array<"rate" | "error"> = [];
  #nextId = 1;

  constructor(
    readonly channel = "memory",
    readonly accountId = "default",
    readonly capabilities: ChannelCapabilities = {
      textLimit: 4000,
      threads: true,
      typing: true,
      markdown: "plain",
      createThread: true,
    },
  ) {}

  async start(onInbound: InboundHandler, ctx?: AdapterContext): Promise<void> {
    this.#onInbound = onInbound;
    this.#onAction = ctx?.onAction ?? null;
    this.#state = "connected";
  }

  async stop(): Promise<void> {
    this.#onInbound = null;
    this.#state = "stopped";
  }

  status(): { state: ChannelStatus } {
    return { state: this.#state };
  }

  /** Make the next sends fail: "rate" = 429 with retry-after 1 ms, "error" = a hard failure. */
  failNext(...kinds: Array<"rate" | "error">): void {
    this.#failures.push(...kinds);
  }

  async send(msg: OutboundMessage): Promise<{ messageIds: string[] }> {
    const f = this.#failures.shift();
    if (f === "rate") throw new RateLimitedError("429 Too Many Requests", 1);
    if (f === "error") throw new Error("platform unavailable");
    this.sent.push(msg);
    return { messageIds: [String(this.#nextId++)] };
  }

  async sendTyping(to: string, threadId?: string): Promise<void> {
    this.typing.push(threadId ? { to, threadId } : { to });
  }

  async createThread(to: string, title: string): Promise<{ threadId: string }> {
    const threadId = `t${this.#nextId++}`;
    this.threads.push({ to, title, threadId });
    return { threadId };
  }

  /** Feed an inbound message as the platform would (validated like a real adapter's output). */
  async inject(partial: Partial<InboundMessage> & { text: string }): Promise<void> {
    if (!this.#onInbound) throw new Error("channel not started");
    const msg = inboundMessageSchema.parse({
      channel: this.channel,
      accountId: this.accountId,
      chatType: "direct",
      peerId: "u1",
      senderId: partial.senderId ?? partial.peerId ?? "u1",
      messageId: `m${this.#nextId++}`,
      ...partial,
    });
    await this.#onInbound(msg);
  }

  async edit(msg: EditMessage): Promise<void> {
    this.edits.push(msg);
  }

  /** A press of a button under a sent message, as a platform would report it; resolves with the notice. */
  async press(
    partial: Partial<InboundAction> & { actionId: string; messageId: string },
  ): Promise<{ notice?: string }> {
    if (!this.#onAction) throw new Error("channel not started with an action handler");
    const press = inboundActionSchema.parse({
      channel: this.channel,
      accountId: this.accountId,
      chatType: "direct",
      peerId: "u1",
      senderId: partial.senderId ?? partial.peerId ?? "u1",
      ...partial,
    });
    return this.#onAction(press);
  }

  texts(): string[] {
    return this.sent.map((m) => m.text);
  }
}
