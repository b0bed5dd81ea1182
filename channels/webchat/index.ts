import { randomUUID } from "node:crypto";
import { ChannelLifecycle } from "../../src/channels/kit/lifecycle.js";
import {
  type AdapterContext,
  type ChannelAdapter,
  type ChannelCapabilities,
  type ChannelStatus,
  type EditMessage,
  type InboundHandler,
  inboundActionSchema,
  inboundMessageSchema,
  type MediaPart,
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
/** Streamed messages whose last text is remembered (the newest ones). */
const SHOWN_KEPT = 500;
/** A streamed reply this recent that the transcript does not hold yet is re-sent to a page that opens. */
const LIVE_MS = 10 * 60_000;

interface Shown {
  to: string;
  text: string;
  at: number;
  /** Grown by edits (a streamed reply), not sent whole once. */
  streamed: boolean;
}

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
    // The page renders Markdown itself (marked + DOMPurify), so text goes out as the model wrote it.
    markdown: "markdown",
    createThread: false,
    // Edits are frames on a local socket: every delta goes out as it arrives.
    streaming: { editIntervalMs: 0, groupEditIntervalMs: 0 },
    // Buttons under a message (approval requests); a press comes back as an `action` frame.
    buttons: true,
  };
  private readonly life: ChannelLifecycle;
  private readonly sockets = new Map<string, Set<WebchatSocket>>();
  private readonly backlog = new Map<string, string[]>();
  /** The last text of each streamed message (by id), so an edit that only appends is sent as a delta. */
  private readonly shown = new Map<string, Shown>();
  private readonly log: Logger;
  private readonly history: WebchatChannelDeps["history"];

  constructor(
    private readonly config: ResolvedWebchatChannelConfig,
    deps: WebchatChannelDeps,
  ) {
    this.accountId = config.accountId;
    this.log = deps.logger;
    this.history = deps.history;
    // Nothing to connect to: the gateway serves the page and its sockets.
    this.life = new ChannelLifecycle("webchat", this.log, {
      connect: async () => this.life.set("connected"),
      startError: (err) =>
        new SwitchboardError("UNAVAILABLE", `webchat start: ${errorMessage(err)}`, { cause: err }),
      disconnect: () => undefined,
    });
  }

  start(onInbound: InboundHandler, ctx?: AdapterContext): Promise<void> {
    return this.life.start(onInbound, ctx);
  }

  /** Also closes pages that connected while stopped. */
  async stop(): Promise<void> {
    await this.life.stop();
    for (const set of this.sockets.values()) for (const s of set) s.close(1001, "gateway stopping");
    this.sockets.clear();
  }

  status(): { state: ChannelStatus; detail?: string } {
    return this.life.status();
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
    void this.greet(socket, visitorId);
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

  /**
   * After hello: the session's recent history (on every open and reconnect), then what was
   * kept while the visitor was away. With history, kept replies are already in it; only kept
   * failure lines are sent on top.
   */
  private async greet(socket: WebchatSocket, visitorId: string): Promise<void> {
    const kept = this.backlog.get(visitorId) ?? [];
    this.backlog.delete(visitorId);
    let withHistory = false;
    const inHistory = new Set<string>();
    if (this.history) {
      try {
        const messages = await this.history(visitorId);
        for (const m of messages) if (m.role === "assistant") inHistory.add(m.text);
        if (socket.readyState === socket.OPEN) socket.send(JSON.stringify({ type: "history", messages }));
        withHistory = true;
      } catch (err) {
        this.log.warn({ err: errorMessage(err) }, "webchat: history not loaded");
      }
    }
    for (const frame of kept) {
      if (withHistory && !frame.includes('"kind":"failure"')) continue;
      if (socket.readyState === socket.OPEN) socket.send(frame);
    }
    if (withHistory) this.resendLive(socket, visitorId, inHistory);
  }

  /**
   * A page opened while a reply streams (or just after, before the transcript holds it) gets that
   * reply whole; its further deltas then apply to it.
   */
  private resendLive(socket: WebchatSocket, visitorId: string, inHistory: Set<string>): void {
    const since = Date.now() - LIVE_MS;
    for (const [id, m] of this.shown) {
      if (m.to !== visitorId || !m.streamed || m.at < since || inHistory.has(m.text)) continue;
      if (socket.readyState === socket.OPEN)
        socket.send(JSON.stringify({ type: "message", id, role: "assistant", text: m.text }));
    }
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
    if (frame.data.type === "action") {
      await this.onPress(socket, visitorId, frame.data.messageId, frame.data.actionId);
      return;
    }
    const { id, text, attachments = [] } = frame.data;
    if (text.trim() === "" && attachments.length === 0) {
      socket.send(
        JSON.stringify({
          type: "error",
          id,
          code: "INVALID_PARAMS",
          message: "text: required (or attachments)",
        }),
      );
      return;
    }
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
    const handler = this.life.handler;
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
    let parts: MediaPart[] = [];
    if (attachments.length) {
      const sink = this.life.context.media;
      if (!sink?.resolve) {
        socket.send(
          JSON.stringify({
            type: "error",
            id,
            code: "NOT_SUPPORTED",
            message: "attachments: this gateway has no media store",
          }),
        );
        return;
      }
      try {
        parts = await sink.resolve(attachments, "attachments");
      } catch (err) {
        const code = err instanceof SwitchboardError ? err.code : "INVALID_PARAMS";
        socket.send(JSON.stringify({ type: "error", id, code, message: errorMessage(err) }));
        return;
      }
    }
    const msg = inboundMessageSchema.parse({
      ...this.visitor(visitorId),
      text,
      messageId: `${visitorId}:${id}`,
      timestamp: Date.now(),
      ...(parts.length ? { parts } : {}),
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

  /** Who a message or a press comes from: the visitor, in their own direct chat. */
  private visitor(visitorId: string) {
    return {
      channel: this.channel,
      accountId: this.accountId,
      chatType: "direct" as const,
      peerId: visitorId,
      senderId: visitorId,
      senderName: "web visitor",
    };
  }

  /** A press of a button under a message: the visitor's own chat only; the answer is a `notice` frame. */
  private async onPress(socket: WebchatSocket, visitorId: string, messageId: string, actionId: string) {
    const onAction = this.life.context.onAction;
    const shown = this.shown.get(messageId);
    if (!onAction || !shown || shown.to !== visitorId) {
      socket.send(JSON.stringify({ type: "notice", id: messageId, text: "Refused: no such button here." }));
      return;
    }
    const press = inboundActionSchema.parse({
      ...this.visitor(visitorId),
      messageId,
      actionId,
    });
    const { notice } = await onAction(press);
    if (notice && socket.readyState === socket.OPEN)
      socket.send(JSON.stringify({ type: "notice", id: messageId, text: notice }));
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
    const frame = JSON.stringify({
      type: "message",
      id,
      role: "assistant",
      text: msg.text,
      ...(msg.kind === "failure" ? { kind: "failure" } : {}),
      ...(msg.actions?.length
        ? { actions: msg.actions.map(({ id, label, style }) => ({ id, label, style })) }
        : {}),
    });
    this.remember(id, msg.to, msg.text, false);
    if (!this.push(msg.to, frame)) {
      const list = this.backlog.get(msg.to) ?? [];
      list.push(frame);
      while (list.length > this.config.backlogPerVisitor) list.shift();
      this.backlog.set(msg.to, list);
    }
    return { messageIds: [id] };
  }

  /** A streamed message grows: only the new text travels when the edit appends; otherwise the whole text. */
  async edit(msg: EditMessage): Promise<void> {
    const before = this.shown.get(msg.messageId)?.text;
    if (msg.actions) {
      // buttons change (`[]` removes them): the whole message travels again
      const frame = JSON.stringify({
        type: "message",
        id: msg.messageId,
        role: "assistant",
        text: msg.text,
        actions: msg.actions.map(({ id, label, style }) => ({ id, label, style })),
      });
      this.remember(msg.messageId, msg.to, msg.text, false);
      if (!this.push(msg.to, frame)) {
        const list = this.backlog.get(msg.to) ?? [];
        list.push(frame);
        while (list.length > this.config.backlogPerVisitor) list.shift();
        this.backlog.set(msg.to, list);
      }
      return;
    }
    const frame =
      before !== undefined && msg.text.startsWith(before)
        ? { type: "delta", id: msg.messageId, text: msg.text.slice(before.length) }
        : { type: "message", id: msg.messageId, role: "assistant", text: msg.text };
    if (frame.type === "delta" && frame.text === "") return;
    this.remember(msg.messageId, msg.to, msg.text, true);
    if (!this.push(msg.to, JSON.stringify(frame)) && frame.type === "message") {
      const list = this.backlog.get(msg.to) ?? [];
      list.push(JSON.stringify(frame));
      while (list.length > this.config.backlogPerVisitor) list.shift();
      this.backlog.set(msg.to, list);
    }
  }

  private remember(id: string, to: string, text: string, streamed: boolean): void {
    this.shown.delete(id);
    this.shown.set(id, { to, text, at: Date.now(), streamed });
    while (this.shown.size > SHOWN_KEPT) {
      const oldest = this.shown.keys().next().value;
      if (oldest === undefined) break;
      this.shown.delete(oldest);
    }
  }

  async sendTyping(to: string): Promise<void> {
    this.push(to, JSON.stringify({ type: "typing", on: true }));
  }

  async stopTyping(to: string): Promise<void> {
    this.push(to, JSON.stringify({ type: "typing", on: false }));
  }
}

export function createWebchatChannel(config: WebchatChannelConfig, deps: WebchatChannelDeps): WebchatChannel {
  const parsed = webchatChannelConfigSchema.safeParse(config);
  if (!parsed.success)
    throw new SwitchboardError("CONFIG", formatIssues(parsed.error.issues, "channels.webchat."));
  return new WebchatChannel(parsed.data, deps);
}
