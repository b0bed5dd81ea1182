import { randomUUID } from "node:crypto";
import {
  type ChannelAdapter,
  type ChannelCapabilities,
  type ChannelStatus,
  type InboundHandler,
  inboundMessageSchema,
  type OutboundMessage,
} from "../../src/channels/types.js";
import { errorMessage, formatIssues, SwitchboardError } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";
import { webchatPage } from "./page.js";
import {
  clientFrameSchema,
  type ResolvedWebchatChannelConfig,
  type WebchatChannelConfig,
  type WebchatChannelDeps,
  type WebchatSocket,
  webchatChannelConfigSchema,
} from "./types.js";

export type { WebchatChannelConfig, WebchatChannelDeps, WebchatSocket } from "./types.js";

const VISITOR_RE = /^[A-Za-z0-9_-]{8,64}$/;

/**
 * The built-in web chat. Each browser is a visitor with a stable id (kept in localStorage); its
 * messages are direct messages from that visitor, and replies are pushed over its WebSocket
 * (kept in a small backlog while it is away). The gateway mounts `connect` at `/webchat/ws`.
 */
export class WebchatChannel implements ChannelAdapter {
  readonly channel = "webchat";
  readonly accountId: string;
  readonly capabilities: ChannelCapabilities = {
    textLimit: 8000,
    threads: false,
    typing: true,
    markdown: "plain",
    createThread: false,
  };
  private onInbound: InboundHandler | undefined;
  private readonly sockets = new Map<string, Set<WebchatSocket>>();
  private readonly backlog = new Map<string, string[]>();
  private readonly log: Logger;

  constructor(
    private readonly config: ResolvedWebchatChannelConfig,
    deps: WebchatChannelDeps,
  ) {
    this.accountId = config.accountId;
    this.log = deps.logger;
  }

  async start(onInbound: InboundHandler): Promise<void> {
    this.onInbound = onInbound;
  }

  async stop(): Promise<void> {
    this.onInbound = undefined;
    for (const set of this.sockets.values()) for (const s of set) s.close(1001, "gateway stopping");
    this.sockets.clear();
  }

  status(): { state: ChannelStatus; detail?: string } {
    return this.onInbound ? { state: "connected" } : { state: "stopped" };
  }

  /** The chat page served at `/`. */
  page(): string {
    return webchatPage(this.config.notice);
  }

  /** A browser connected; `visitorId` comes from the page (validated here). */
  connect(socket: WebchatSocket, visitorId: string | undefined): void {
    if (!visitorId || !VISITOR_RE.test(visitorId)) {
      socket.send(
        JSON.stringify({
          type: "error",
          code: "INVALID_PARAMS",
          message: "v: visitor id must be 8-64 of A-Z a-z 0-9 _ -",
        }),
      );
      socket.close(4400, "bad visitor id");
      return;
    }
    const set = this.sockets.get(visitorId) ?? new Set<WebchatSocket>();
    set.add(socket);
    this.sockets.set(visitorId, set);
    socket.send(
      JSON.stringify({
        type: "hello",
        visitorId,
        ...(this.config.notice ? { notice: this.config.notice } : {}),
      }),
    );
    for (const frame of this.backlog.get(visitorId) ?? []) socket.send(frame);
    this.backlog.delete(visitorId);
    socket.on("close", () => {
      set.delete(socket);
      if (set.size === 0) this.sockets.delete(visitorId);
    });
    socket.on("message", (data) => {
      // A frame that fails in an unforeseen way answers an error; the socket and the process stay up.
      this.onFrame(socket, visitorId, data.toString()).catch((err: unknown) => {
        this.log.warn({ err: errorMessage(err) }, "webchat: frame failed");
        if (socket.readyState === socket.OPEN)
          socket.send(JSON.stringify({ type: "error", code: "INTERNAL", message: "frame failed" }));
      });
    });
  }

  private async onFrame(socket: WebchatSocket, visitorId: string, raw: string): Promise<void> {
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      socket.send(JSON.stringify({ type: "error", code: "INVALID_PARAMS", message: "frame is not JSON" }));
      return;
    }
    const frame = clientFrameSchema.safeParse(json);
    if (!frame.success) {
      socket.send(
        JSON.stringify({ type: "error", code: "INVALID_PARAMS", message: formatIssues(frame.error.issues) }),
      );
      return;
    }
    if (frame.data.type === "ping") {
      socket.send(JSON.stringify({ type: "pong" }));
      return;
    }
    const { id, text } = frame.data;
    if (text.length > this.config.maxMessageChars) {
      socket.send(
        JSON.stringify({
          type: "error",
          id,
          code: "INVALID_PARAMS",
          message: `text: at most ${this.config.maxMessageChars} characters`,
        }),
      );
      return;
    }
    const handler = this.onInbound;
    if (!handler) {
      socket.send(
        JSON.stringify({
          type: "error",
          id,
          code: "UNAVAILABLE",
          message: "the gateway is not accepting messages",
        }),
      );
      return;
    }
    const msg = inboundMessageSchema.parse({
      channel: this.channel,
      accountId: this.accountId,
      chatType: "direct",
      peerId: visitorId,
      senderId: visitorId,
      senderName: "web visitor",
      text,
      messageId: `${visitorId}:${id}`,
      timestamp: Date.now(),
    });
    try {
      await handler(msg);
      socket.send(JSON.stringify({ type: "ack", id }));
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, "webchat: message not accepted");
      const code = err instanceof SwitchboardError ? err.code : "UNAVAILABLE";
      socket.send(
        JSON.stringify({ type: "error", id, code, message: "not accepted; send it again in a moment" }),
      );
    }
  }

  private push(visitorId: string, frame: string): boolean {
    const set = this.sockets.get(visitorId);
    let sent = false;
    for (const s of set ?? []) {
      if (s.readyState === s.OPEN) {
        s.send(frame);
        sent = true;
      }
    }
    return sent;
  }

  async send(msg: OutboundMessage): Promise<{ messageIds: string[] }> {
    const id = randomUUID();
    const frame = JSON.stringify({ type: "message", id, role: "assistant", text: msg.text });
    if (!this.push(msg.to, frame)) {
      const list = this.backlog.get(msg.to) ?? [];
      list.push(frame);
      while (list.length > this.config.backlogPerVisitor) list.shift();
      this.backlog.set(msg.to, list);
    }
    return { messageIds: [id] };
  }

  async sendTyping(to: string): Promise<void> {
    this.push(to, JSON.stringify({ type: "typing" }));
  }
}

export function createWebchatChannel(config: WebchatChannelConfig, deps: WebchatChannelDeps): WebchatChannel {
  const parsed = webchatChannelConfigSchema.safeParse(config);
  if (!parsed.success)
    throw new SwitchboardError("CONFIG", formatIssues(parsed.error.issues, "channels.webchat."));
  return new WebchatChannel(parsed.data, deps);
}
