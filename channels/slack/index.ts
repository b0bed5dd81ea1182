import { App, SocketModeReceiver, webApi } from "@slack/bolt";
import { parseAccountConfig } from "../../src/channels/kit/config.js";
import { escapeSlack } from "../../src/channels/kit/format/index.js";
import { ChannelLifecycle } from "../../src/channels/kit/lifecycle.js";
import { megabytes, takeAttachments } from "../../src/channels/kit/media.js";
import type {
  AccountLease,
  AdapterContext,
  ChannelAdapter,
  ChannelCapabilities,
  ChannelStatus,
  EditMessage,
  InboundHandler,
  InboundMessage,
  OutboundMessage,
  WebhookHeaders,
  WebhookResponse,
} from "../../src/channels/types.js";
import { errorMessage, formatIssues, SwitchboardError } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";
import { within } from "../../src/retry/index.js";
import { interactivePayload, slackPressToAction } from "./actions.js";
import { toSwitchboardError } from "./errors.js";
import { type SlackInboundContext, slackEventToInbound } from "./inbound.js";
import { slackLogger } from "./logger.js";
import { SlackDirectory } from "./lookup.js";
import { SLACK_CAPTION_LIMIT, slackAttachments, slackFileOrigins, uploadSlackFiles } from "./media.js";
import { createSlackThread, postSlackMessage, setSlackThreadStatus, updateSlackMessage } from "./outbound.js";
import { DispatchReceiver } from "./receiver.js";
import { RecentKeys } from "./recent.js";
import { eventsEnvelopeSchema, header, verifySlackSignature } from "./signature.js";
import {
  type ResolvedSlackChannelConfig,
  type SlackChannelConfig,
  type SlackChannelDeps,
  slackChannelConfigSchema,
} from "./types.js";

export type { SlackChannelConfig, SlackChannelDeps } from "./types.js";

/** What the Socket Mode client emits as `slack_event`. */
interface SocketEnvelope {
  ack: () => Promise<void>;
  type: string;
  body: unknown;
  retry_num?: number;
  retry_reason?: string;
}

/**
 * One Slack workspace installation over Bolt. Inbound arrives through Socket Mode (users) or
 * the Events API (`handleEvents`, mounted by the gateway); both paths run the event through
 * Bolt via a dispatch-only receiver and acknowledge Slack only after the inbound handler
 * accepted it. Retries are deduplicated by `event_id`, and the `message` + `app_mention`
 * pair Slack sends for one mention by `channel:ts`.
 */
export class SlackChannel implements ChannelAdapter {
  readonly channel = "slack";
  readonly accountId: string;
  readonly capabilities: ChannelCapabilities = {
    textLimit: 4000,
    threads: true,
    // assistant.threads.setStatus, in threads only; elsewhere sendTyping is a no-op.
    typing: true,
    markdown: "slack-mrkdwn",
    // A thread is the replies under a message: createThread posts the title as that message.
    createThread: true,
    // chat.update is Tier 3 (about 50 a minute).
    streaming: { editIntervalMs: 1200, groupEditIntervalMs: 1200 },
    // No voice bubble for bots: audio goes as a file with a player.
    media: { captionLimit: SLACK_CAPTION_LIMIT, voiceNotes: false },
    // Block Kit buttons; a press is a block_actions payload, answered with an ephemeral notice.
    buttons: true,
  };

  private readonly log: Logger;
  private readonly now: () => number;
  private readonly clientOptions: webApi.WebClientOptions;
  private readonly client: webApi.WebClient;
  private readonly directory: SlackDirectory;
  private readonly receiver = new DispatchReceiver();
  private app: App | undefined;
  private socket: SocketModeReceiver | undefined;
  private identity: SlackInboundContext | undefined;
  private readonly life: ChannelLifecycle;
  private abortStart: (() => void) | undefined;
  private readonly doneEvents: RecentKeys;
  private readonly pendingEvents = new Map<string, Promise<boolean>>();
  private readonly seenMessages: RecentKeys;

  constructor(
    private readonly config: ResolvedSlackChannelConfig,
    deps: SlackChannelDeps,
  ) {
    this.accountId = config.accountId;
    this.log = deps.logger.child({ channel: "slack", accountId: config.accountId });
    this.now = deps.now ?? Date.now;
    this.clientOptions = {
      ...(config.apiUrl ? { slackApiUrl: config.apiUrl } : {}),
      // Delivery owns retries: fail fast, and hand rate limits back as RateLimitedError.
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: 30_000,
      logger: slackLogger(this.log),
    };
    this.client = new webApi.WebClient(config.botToken, this.clientOptions);
    this.directory = new SlackDirectory(this.client, config.dedupeSize);
    this.doneEvents = new RecentKeys(config.dedupeSize);
    this.seenMessages = new RecentKeys(config.dedupeSize);
    this.life = new ChannelLifecycle("slack", this.log, {
      connect: () => this.connect(),
      startError: (err) => toSwitchboardError(err, "start"),
      disconnect: async () => {
        // A start() still trying to reach Slack would never settle once the client is shut down.
        this.abortStart?.();
        await this.socket?.client.disconnect();
      },
    });
  }

  status(): { state: ChannelStatus; detail?: string } {
    return this.life.status();
  }

  /** Socket Mode holds a connection: with many gateways one holds it (HTTP mode: every gateway). */
  get exclusive(): boolean {
    return this.config.mode === "socket";
  }

  /** The lease Socket Mode runs under (many gateways); its acknowledgements check it. */
  private lease: AccountLease | undefined;

  start(onInbound: InboundHandler, ctx?: AdapterContext): Promise<void> {
    this.lease = ctx?.lease;
    return this.life.start(onInbound, ctx);
  }

  stop(): Promise<void> {
    return this.life.stop();
  }

  async send(msg: OutboundMessage): Promise<{ messageIds: string[] }> {
    if (msg.attachments?.length) {
      // Uploads complete into a conversation: a DM peer (user id) maps to the DM seen on inbound.
      const channel = /^[UW]/.test(msg.to) ? (this.directory.dmChannelOf(msg.to) ?? msg.to) : msg.to;
      const limits = { captionLimit: SLACK_CAPTION_LIMIT, textLimit: this.capabilities.textLimit };
      return {
        messageIds: await uploadSlackFiles(
          this.client,
          channel,
          { ...msg, attachments: msg.attachments },
          limits,
        ),
      };
    }
    return { messageIds: await postSlackMessage(this.client, msg, this.capabilities.textLimit) };
  }

  async edit(msg: EditMessage): Promise<void> {
    // chat.update needs the conversation: a DM peer (user id) maps to the DM seen on inbound.
    const channel = /^[UW]/.test(msg.to) ? (this.directory.dmChannelOf(msg.to) ?? msg.to) : msg.to;
    await updateSlackMessage(this.client, channel, msg, this.capabilities.textLimit);
  }

  /** Best effort, and only inside a thread (Slack has no bot typing indicator elsewhere). */
  async sendTyping(to: string, threadId?: string): Promise<void> {
    if (!threadId) return;
    // A DM peer is a user id; the status call needs the DM's conversation id seen on inbound.
    const channelId = /^[UW]/.test(to) ? this.directory.dmChannelOf(to) : to;
    if (!channelId) return;
    if (!(await setSlackThreadStatus(this.client, channelId, threadId, "is typing…"))) {
      this.log.debug({ to, threadId }, "slack assistant.threads.setStatus failed (not an assistant thread?)");
    }
  }

  async createThread(to: string, title: string): Promise<{ threadId: string }> {
    return createSlackThread(this.client, to, title);
  }

  /**
   * `POST /hooks/slack/<accountId>/events` (HTTP mode). Verifies the v0 signature over the
   * raw body, answers url_verification, and answers an event_callback with 200 only once it
   * was accepted (500 lets Slack retry; a retry of an accepted event_id gets 200 at once).
   */
  async probe(): Promise<{ ok: boolean; detail: string }> {
    try {
      const auth = await this.client.auth.test();
      return { ok: true, detail: `auth.test: ${auth.user ?? "?"} in team ${auth.team ?? "?"}` };
    } catch (err) {
      return { ok: false, detail: `auth.test failed: ${toSwitchboardError(err, "auth.test").message}` };
    }
  }

  async handleEvents(headers: WebhookHeaders, rawBody: string): Promise<WebhookResponse> {
    const secret = this.config.signingSecret;
    if (this.config.mode !== "http" || !secret) {
      return { status: 404, body: { error: "this slack account is not in http mode" } };
    }
    const check = verifySlackSignature(
      headers,
      rawBody,
      secret,
      this.now(),
      this.config.maxRequestAgeSeconds,
    );
    if (!check.ok) return { status: 401, body: { error: check.reason } };
    // The Interactivity Request URL may be this one: a signed `payload=<json>` form is a press.
    const interactive = interactivePayload(rawBody);
    if (interactive !== undefined) return this.onInteractive(interactive);
    let json: unknown;
    try {
      json = JSON.parse(rawBody);
    } catch {
      return { status: 400, body: { error: "body: not JSON" } };
    }
    const env = eventsEnvelopeSchema.safeParse(json);
    if (!env.success) {
      const type = (json as { type?: unknown } | null)?.type;
      // Envelope types we do not use are acknowledged, so Slack does not retry them.
      if (
        typeof type === "string" &&
        !["url_verification", "event_callback", "app_rate_limited"].includes(type)
      ) {
        return { status: 200 };
      }
      return { status: 400, body: { error: formatIssues(env.error.issues, "body.") } };
    }
    if (env.data.type === "url_verification") return { status: 200, body: { challenge: env.data.challenge } };
    if (env.data.type === "app_rate_limited") {
      this.log.warn("slack reports this app is rate limited for events (app_rate_limited)");
      return { status: 200 };
    }
    if (!this.life.accepting) {
      return { status: 503, body: { error: "slack channel is not running" } };
    }
    const retryNum = Number(header(headers, "x-slack-retry-num") ?? "") || undefined;
    const accepted = await this.accept(
      env.data.event_id,
      json as Record<string, unknown>,
      retryNum,
      header(headers, "x-slack-retry-reason"),
    );
    return accepted ? { status: 200 } : { status: 500, body: { error: "inbound handler failed" } };
  }

  // ------------------------------------------------------------------------------ internals

  /**
   * A signed interactive request (HTTP mode): run through Bolt (a `block_actions` listener),
   * answered 200 once handled or after 2.5 s (Slack wants an answer within 3 s; the press goes
   * on). Other interactive types are acknowledged and ignored.
   */
  private async onInteractive(payload: unknown): Promise<WebhookResponse> {
    if (!payload || typeof payload !== "object" || Array.isArray(payload))
      return { status: 400, body: { error: "payload: not a JSON object" } };
    if (!this.life.accepting) return { status: 503, body: { error: "slack channel is not running" } };
    const run = this.receiver.dispatch(payload as Record<string, unknown>).catch((err: unknown) => {
      this.log.warn({ err: errorMessage(err) }, "slack interactive dispatch failed");
    });
    void this.life.track(run);
    await within(run, 2500);
    return { status: 200 };
  }

  /**
   * A button press: validated, handed to the gateway's press handler, and the notice shown to
   * the presser only (chat.postEphemeral). A forged or foreign press is refused by the handler.
   */
  private async onPress(body: unknown): Promise<void> {
    const parsed = slackPressToAction(body, this.accountId);
    if (!parsed.ok) {
      this.log.warn({ error: parsed.error }, "slack: button press refused");
      const p = body as { user?: { id?: unknown }; channel?: { id?: unknown } } | null;
      const user = typeof p?.user?.id === "string" ? p.user.id : undefined;
      const channel = typeof p?.channel?.id === "string" ? p.channel.id : undefined;
      if (user && channel) await this.ephemeral(channel, user, "Refused: this button is not valid.");
      return;
    }
    let notice: string | undefined;
    const onAction = this.life.context.onAction;
    try {
      notice = onAction ? (await onAction(parsed.action)).notice : "Buttons are not handled here.";
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, "slack: press handler failed");
      notice = "Something went wrong; try again.";
    }
    if (notice) await this.ephemeral(parsed.payload.channel.id, parsed.payload.user.id, notice);
  }

  private async ephemeral(channel: string, user: string, text: string): Promise<void> {
    await this.client.chat
      .postEphemeral({ channel, user, text: escapeSlack(text) })
      .catch((err: unknown) => this.log.warn({ err: errorMessage(err) }, "slack: chat.postEphemeral failed"));
  }

  private async connect(): Promise<void> {
    const auth = await this.client.auth.test();
    if (!auth.user_id)
      throw new SwitchboardError(
        "CONFIG",
        "slack auth.test returned no user_id: botToken must be a bot token (xoxb-…)",
      );
    if (this.life.stopping) throw new SwitchboardError("UNAVAILABLE", "slack: start aborted by stop()");
    this.identity = { accountId: this.accountId, botUserId: auth.user_id, botId: auth.bot_id ?? "" };
    this.app ??= this.createApp(this.identity);
    if (this.config.mode === "socket") await this.connectSocket();
    this.life.set("connected");
  }

  private createApp(me: SlackInboundContext): App {
    const app = new App({
      token: this.config.botToken,
      botId: me.botId,
      botUserId: me.botUserId,
      receiver: this.receiver,
      clientOptions: this.clientOptions,
      logger: slackLogger(this.log),
      // auth.test already ran in connect().
      tokenVerificationEnabled: false,
    });
    app.event("message", async ({ event, body }) => this.onEvent(event, body));
    app.event("app_mention", async ({ event, body }) => this.onEvent(event, body));
    app.action({ type: "block_actions" }, async ({ body }) => this.onPress(body));
    app.error(async (err) => {
      this.log.error({ err: errorMessage(err) }, "slack event processing failed");
    });
    return app;
  }

  private async connectSocket(): Promise<void> {
    if (!this.socket) {
      const appToken = this.config.appToken as string;
      this.socket = new SocketModeReceiver({
        appToken,
        logger: slackLogger(this.log),
        serverPingTimeout: this.config.serverPingTimeoutMs,
        installerOptions: { clientOptions: this.clientOptions },
      });
      // The receiver is only used for its configured client; it is never init()ed with the
      // app, so its own listener stays inert and this one acknowledges after acceptance.
      const client = this.socket.client;
      client.on("slack_event", (args: SocketEnvelope) => {
        void this.onSocketEnvelope(args).catch((err: unknown) =>
          this.log.warn({ err: errorMessage(err) }, "slack socket mode ack failed; Slack will redeliver"),
        );
      });
      client.on("connected", () => !this.life.stopping && this.life.set("connected"));
      client.on(
        "reconnecting",
        () => !this.life.stopping && this.life.set("reconnecting", "socket mode reconnecting"),
      );
    }
    // Socket Mode retries a failing apps.connections.open forever (network errors); stop() ends that wait.
    const aborted = new Promise<never>((_, reject) => {
      this.abortStart = () =>
        reject(new SwitchboardError("UNAVAILABLE", "slack socket mode: start aborted by stop()"));
    });
    try {
      await Promise.race([this.socket.client.start(), aborted]);
    } finally {
      this.abortStart = undefined;
    }
  }

  /** Acknowledges an envelope only after its event was accepted; other envelope types at once. */
  private async onSocketEnvelope(args: SocketEnvelope): Promise<void> {
    const body = args.body as Record<string, unknown> | undefined;
    const eventId = typeof body?.event_id === "string" ? body.event_id : undefined;
    if (args.type === "interactive" && body) {
      await args.ack();
      await this.receiver.dispatch(body);
      return;
    }
    if (args.type !== "events_api" || !body || !eventId) return args.ack();
    if (!(await this.accept(eventId, body, args.retry_num, args.retry_reason))) return;
    // Past the lease's end another gateway may hold the account: no ack, Slack redelivers there.
    if (this.lease && !this.lease.valid()) return;
    await args.ack();
  }

  /** Runs one event_callback once per event_id; true when accepted (or already accepted). */
  private accept(
    eventId: string,
    body: Record<string, unknown>,
    retryNum?: number,
    retryReason?: string,
  ): Promise<boolean> {
    if (this.doneEvents.has(eventId)) return Promise.resolve(true);
    // A retry that overtakes the first delivery waits for its outcome instead of running twice.
    const pending = this.pendingEvents.get(eventId);
    if (pending) return pending;
    if (retryNum) this.log.debug({ eventId, retryNum, retryReason }, "slack event retry");
    const run = this.receiver.dispatch(body, retryNum, retryReason).then(
      (failure) => {
        if (failure === undefined) this.doneEvents.add(eventId);
        else
          this.log.warn(
            { eventId, err: errorMessage(failure) },
            "slack event not accepted; Slack will retry",
          );
        return failure === undefined;
      },
      (err: unknown) => {
        this.log.error({ eventId, err: errorMessage(err) }, "slack event dispatch failed");
        return false;
      },
    );
    this.pendingEvents.set(eventId, run);
    void this.life.track(run).finally(() => this.pendingEvents.delete(eventId));
    return run;
  }

  /** The message with its files taken by the app's media sink (when one is wired in). */
  private async withParts(msg: InboundMessage, files: unknown): Promise<InboundMessage> {
    const attachments = slackAttachments(files, {
      client: this.client,
      token: this.config.botToken,
      allowedOrigins: this.config.fileOrigins ?? slackFileOrigins(this.config.apiUrl),
    });
    const parts = await takeAttachments(this.life.context, attachments, {
      channel: "slack",
      accountId: this.accountId,
      maxBytes: megabytes(this.config.mediaMaxMb),
    });
    return parts ? { ...msg, parts } : msg;
  }

  private async onEvent(event: unknown, body: object): Promise<void> {
    const handler = this.life.handler;
    const me = this.identity;
    if (!handler || !me) return;
    const first = slackEventToInbound(event, me);
    if (first.kind !== "message") {
      if (first.kind === "invalid") this.log.warn({ err: first.error }, "slack event dropped");
      else this.log.debug({ reason: first.reason }, "slack event ignored");
      return;
    }
    // message + app_mention for the same post: the first one in wins.
    if (this.seenMessages.has(first.dedupeKey)) return;
    this.seenMessages.add(first.dedupeKey);
    try {
      const [senderName, channelType] = await Promise.all([
        this.directory.userName(first.message.senderId),
        first.channelTypeKnown ? undefined : this.directory.channelType(first.conversationId),
      ]);
      const full = slackEventToInbound(event, me, { senderName, channelType });
      const msg = full.kind === "message" ? full.message : first.message;
      if (msg.chatType === "direct") this.directory.rememberDm(msg.senderId, first.conversationId);
      await handler(await this.withParts(msg, (event as { files?: unknown }).files));
    } catch (err) {
      this.seenMessages.delete(first.dedupeKey);
      this.receiver.reportFailure(body, err);
    }
  }
}

/** Validates the account config (errors name `channels.slack.accounts.<id>.<field>`). */
export function createSlackChannel(config: SlackChannelConfig, deps: SlackChannelDeps): SlackChannel {
  return new SlackChannel(parseAccountConfig("slack", slackChannelConfigSchema, config), deps);
}
