import { Bot, type Context, type Transformer } from "grammy";
import type { Message, Update } from "grammy/types";
import { parseAccountConfig } from "../../src/channels/kit/config.js";
import { ConflictBackoff } from "../../src/channels/kit/conflict.js";
import { deliverWithRetry } from "../../src/channels/kit/inbound-retry.js";
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
import { errorMessage, SwitchboardError } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";
import { abortableSleep } from "../../src/retry/index.js";
import { toSwitchboardError } from "./errors.js";
import { telegramCallbackToAction, telegramUpdateToInbound } from "./inbound.js";
import {
  AlbumGatherer,
  sendTelegramMedia,
  TELEGRAM_CAPTION_LIMIT,
  type TelegramDownload,
  telegramAttachments,
  telegramDownloader,
} from "./media.js";
import {
  createTelegramTopic,
  editTelegramMessage,
  sendTelegramMessage,
  sendTelegramTyping,
} from "./outbound.js";
import {
  type ResolvedTelegramChannelConfig,
  type TelegramChannelConfig,
  type TelegramChannelDeps,
  telegramChannelConfigSchema,
} from "./types.js";
import { parseUpdateBody, secretMatches } from "./webhook.js";

export type { TelegramChannelConfig, TelegramChannelDeps } from "./types.js";

/** Owner commands shown in Telegram's command menu (SEMANTICS §2). */
const COMMANDS = [
  { command: "status", description: "Show this chat's session status" },
  { command: "send", description: "Owner only: /send on | off | inherit" },
];

/** Only these update types are requested; the rest would be ignored anyway. */
const ALLOWED_UPDATES = ["message", "channel_post", "callback_query"] as const;

/**
 * Telegram bot account over grammY. Polling uses grammY's built-in loop rather than the
 * runner: the updates of a batch are handed over chat by chat side by side, each chat in order,
 * and the next getUpdates (which confirms the batch) waits until all of them were accepted;
 * `bot.stop()` confirms the offset so a restart resumes exactly after the last handled update.
 */
export class TelegramChannel implements ChannelAdapter {
  readonly channel = "telegram";
  readonly accountId: string;
  readonly capabilities: ChannelCapabilities = {
    textLimit: 4096,
    threads: true,
    typing: true,
    markdown: "telegram-html",
    // Forum supergroups only; elsewhere createThread answers NOT_SUPPORTED.
    createThread: true,
    // Flood control: about one message a second per chat, 20 a minute in a group.
    streaming: { editIntervalMs: 1000, groupEditIntervalMs: 3000 },
    media: { captionLimit: TELEGRAM_CAPTION_LIMIT, voiceNotes: true },
    // Inline keyboards; a press is a callback_query, answered with the gateway's notice.
    buttons: true,
  };

  private readonly bot: Bot;
  private readonly log: Logger;
  private readonly life: ChannelLifecycle;
  private polling: Promise<void> | undefined;
  /** Aborted by stop(): cuts inbound retry waits and downloads short. */
  private stopSignal = new AbortController();
  /** The lease this gateway polls under (many gateways on Redis); absent: polls freely. */
  private lease: AccountLease | undefined;
  /** 409 on getUpdates: retried with backoff, never the end of polling (API.md §8.5). */
  private readonly conflicts: ConflictBackoff;
  private inConflict = false;
  private readonly download: TelegramDownload;
  /** Album items by chat and media_group_id, until the album is complete. */
  private readonly albums: AlbumGatherer<Update>;
  /** Per chat, the last accept of the current batch. */
  private readonly tails = new Map<string, Promise<void>>();

  constructor(
    private readonly config: ResolvedTelegramChannelConfig,
    deps: TelegramChannelDeps,
  ) {
    this.accountId = config.accountId;
    this.log = deps.logger.child({ channel: "telegram", accountId: config.accountId });
    this.bot = new Bot(config.token, {
      client: {
        ...(config.apiRoot ? { apiRoot: config.apiRoot } : {}),
        // Long enough for a long poll, short enough that a dead connection does not block start or send.
        timeoutSeconds: config.pollingTimeoutSeconds + 30,
      },
    });
    this.conflicts = new ConflictBackoff(
      this.log,
      "telegram getUpdates answered 409 Conflict: another process is polling this bot token (or a webhook is set). " +
        'Several gateways on one token need storage.driver "redis" (one holds the account by lease); ' +
        "otherwise run one gateway per token, or stop the other poller",
    );
    this.bot.api.config.use(this.pollGuard);
    this.download = telegramDownloader(
      this.bot.api,
      config.apiRoot ?? "https://api.telegram.org",
      config.token,
    );
    this.albums = new AlbumGatherer(
      (updates) => void this.life.track(this.onAlbum(updates)),
      config.albumQuietMs,
      config.albumMaxWaitMs,
    );
    this.bot.on(["message", "channel_post"], (ctx) => this.onUpdate(ctx));
    this.bot.on("callback_query", (ctx) => this.onCallback(ctx));
    // Polling-mode middleware errors land here; onUpdate already retried and logged.
    this.bot.catch((err) =>
      this.log.error({ err: errorMessage(err.error) }, "telegram update handler failed"),
    );
    this.life = new ChannelLifecycle("telegram", this.log, {
      connect: () => this.connect(),
      startError: (err) => toSwitchboardError(err, "start"),
      disconnect: async () => {
        // Albums still gathering are handed over now (their downloads see the stop and end as notes).
        this.albums.flushAll();
        this.stopSignal.abort();
        if (!this.bot.isRunning()) return;
        // Aborts a pending getUpdates (or grammY's start-up retries) and confirms the offset of
        // the last handled update.
        await this.bot
          .stop()
          .catch((err: unknown) => this.log.warn({ err: errorMessage(err) }, "telegram stop"));
      },
      drain: async () => {
        await this.polling;
        this.polling = undefined;
        await Promise.allSettled([...this.tails.values()]);
      },
    });
  }

  status(): { state: ChannelStatus; detail?: string } {
    return this.life.status();
  }

  /** Long polling holds the token: with many gateways only one may poll (webhook mode: any). */
  get exclusive(): boolean {
    return this.config.mode !== "webhook";
  }

  start(onInbound: InboundHandler, ctx?: AdapterContext): Promise<void> {
    this.lease = ctx?.lease;
    return this.life.start(onInbound, ctx);
  }

  stop(): Promise<void> {
    return this.life.stop();
  }

  async send(msg: OutboundMessage): Promise<{ messageIds: string[] }> {
    if (msg.attachments?.length) {
      const messageIds = await sendTelegramMedia(
        this.bot.api,
        { ...msg, attachments: msg.attachments },
        { captionLimit: TELEGRAM_CAPTION_LIMIT, textLimit: this.capabilities.textLimit, logger: this.log },
      );
      return { messageIds };
    }
    const messageIds = await sendTelegramMessage(this.bot.api, msg, this.capabilities.textLimit, this.log);
    return { messageIds };
  }

  async sendTyping(to: string, threadId?: string): Promise<void> {
    await sendTelegramTyping(this.bot.api, to, threadId);
  }

  async edit(msg: EditMessage): Promise<void> {
    await editTelegramMessage(this.bot.api, msg, this.log);
  }

  async createThread(to: string, title: string): Promise<{ threadId: string }> {
    return createTelegramTopic(this.bot.api, to, title);
  }

  /**
   * `POST /hooks/telegram/<accountId>`: checks the secret header in constant time, then runs
   * the update through the bot and answers 200 only once the inbound handler accepted it
   * (500 makes Telegram redeliver; 503 while stopped).
   */
  async probe(): Promise<{ ok: boolean; detail: string }> {
    try {
      const me = await this.bot.api.getMe();
      return { ok: true, detail: `getMe: @${me.username} (id ${me.id})` };
    } catch (err) {
      return { ok: false, detail: `getMe failed: ${toSwitchboardError(err, "getMe").message}` };
    }
  }

  async handleWebhook(headers: WebhookHeaders, body: unknown): Promise<WebhookResponse> {
    if (this.config.mode !== "webhook" || !this.config.webhookSecret) {
      return { status: 404, body: { error: "this telegram account is not in webhook mode" } };
    }
    if (!secretMatches(headers, this.config.webhookSecret))
      return { status: 401, body: { error: "secret token is wrong" } };
    if (!this.life.accepting) {
      return { status: 503, body: { error: "telegram channel is not running" } };
    }
    const parsed = parseUpdateBody(body);
    if (!parsed.ok)
      return { status: 400, body: { error: "body: expected a Telegram Update with a numeric update_id" } };
    try {
      await this.life.track(this.bot.handleUpdate(parsed.update as unknown as Update));
      return { status: 200 };
    } catch (err) {
      this.log.error({ err: errorMessage(err) }, "telegram webhook update failed; Telegram will redeliver");
      return { status: 500, body: { error: "inbound handler failed" } };
    }
  }

  // ------------------------------------------------------------------------------ internals

  /**
   * Every getUpdates goes through here. A 409 (another poller on the token) is waited out with
   * backoff and asked again, so grammY's loop, which ends on 409, never sees one while polling.
   * Under a lease, a getUpdates (which confirms the offset: an acknowledgement) is made only
   * while the lease is valid; past its end an empty batch is answered and the app stops polling.
   */
  private readonly pollGuard: Transformer = async (prev, method, payload, signal) => {
    if (method !== "getUpdates") return prev(method, payload, signal);
    // This call confirms the last batch: every update of it is accepted (or given up on) first.
    if (this.tails.size > 0) await Promise.allSettled([...this.tails.values()]);
    for (;;) {
      if (this.lease && !this.lease.valid()) {
        if (this.bot.isRunning())
          await abortableSleep(500, signal as AbortSignal | undefined).catch(() => undefined);
        return { ok: true, result: [] } as unknown as Awaited<ReturnType<typeof prev>>;
      }
      const res = await prev(method, payload, signal);
      if (res.ok) {
        if (this.inConflict) {
          this.inConflict = false;
          this.conflicts.ok();
          if (this.life.state === "reconnecting") this.life.set("connected");
        }
        return res;
      }
      // bot.stop()'s confirming call (no longer running) and other errors go back to grammY.
      if (res.error_code !== 409 || !this.bot.isRunning() || this.life.stopping) return res;
      const waitMs = this.conflicts.conflict(res.description);
      this.inConflict = true;
      if (this.life.state === "connected")
        this.life.set("reconnecting", "409 conflict: another process polls this bot token; retrying");
      try {
        await abortableSleep(waitMs, signal as AbortSignal | undefined);
      } catch {
        return res;
      }
    }
  };

  private async connect(): Promise<void> {
    this.stopSignal = new AbortController();
    // One getMe without grammY's endless retries: a bad token or unreachable API fails start() clearly.
    this.bot.botInfo = await this.bot.api.getMe();
    if (this.life.stopping) throw new SwitchboardError("UNAVAILABLE", "telegram: start aborted by stop()");
    // Not awaited: polling starts without it (a takeover by another gateway waits for nothing).
    void this.bot.api
      .setMyCommands(COMMANDS)
      .catch((err: unknown) => this.log.warn({ err: errorMessage(err) }, "telegram setMyCommands failed"));
    if (this.config.mode === "webhook") {
      if (this.config.webhookUrl) {
        await this.bot.api.setWebhook(this.config.webhookUrl, {
          secret_token: this.config.webhookSecret,
          allowed_updates: [...ALLOWED_UPDATES],
        });
      } else {
        this.log.info(
          "telegram webhook mode without webhookUrl: expecting the webhook to be registered already",
        );
      }
      this.life.set("connected");
      return;
    }
    await new Promise<void>((resolve, reject) => {
      let started = false;
      this.polling = this.bot
        .start({
          allowed_updates: [...ALLOWED_UPDATES],
          timeout: this.config.pollingTimeoutSeconds,
          onStart: () => {
            started = true;
            this.life.set("connected");
            resolve();
          },
        })
        .catch((err: unknown) => {
          const e = toSwitchboardError(err, "getUpdates");
          if (!started) return reject(e);
          // 401 ends grammY's loop (409 never reaches it: pollGuard retries it), so say what to fix.
          this.log.error({ err: e.message }, "telegram polling stopped");
          this.life.set("error", e.message);
        });
    });
  }

  /**
   * A button press: validated, handed to the gateway's press handler, and always answered
   * (answerCallbackQuery, with the notice) so the client's spinner stops. A forged or foreign
   * press is refused by the handler; nothing runs.
   */
  private async onCallback(ctx: Context): Promise<void> {
    const q = ctx.callbackQuery;
    if (!q) return;
    const parsed = telegramCallbackToAction(ctx.update, this.accountId);
    let notice: string | undefined;
    if (!parsed.ok) {
      this.log.warn({ error: parsed.error }, "telegram: callback refused");
      notice = "Refused: this button is not valid.";
    } else {
      const onAction = this.life.context.onAction;
      try {
        notice = onAction ? (await onAction(parsed.action)).notice : "Buttons are not handled here.";
      } catch (err) {
        this.log.warn({ err: errorMessage(err) }, "telegram: press handler failed");
        notice = "Something went wrong; try again.";
      }
    }
    await this.bot.api
      .answerCallbackQuery(q.id, notice ? { text: notice.slice(0, 200) } : {})
      .catch((err: unknown) =>
        this.log.warn({ err: errorMessage(err) }, "telegram: answerCallbackQuery failed"),
      );
  }

  private async onUpdate(ctx: Context): Promise<void> {
    const handler = this.life.handler;
    // After stop() the rest of a fetched batch is left unconfirmed, so Telegram redelivers it.
    if (!handler || this.life.stopping) return;
    const me = this.bot.botInfo;
    const result = telegramUpdateToInbound(ctx.update, {
      accountId: this.accountId,
      botId: me.id,
      botUsername: me.username,
    });
    if (result.kind === "ignored") {
      this.log.debug({ updateId: ctx.update.update_id, reason: result.reason }, "telegram update ignored");
      return;
    }
    if (result.kind === "invalid") {
      this.log.warn({ updateId: ctx.update.update_id, err: result.error }, "telegram update dropped");
      return;
    }
    const msg = (ctx.update.message ?? ctx.update.channel_post) as Message;
    if (msg.media_group_id) {
      // One album is one turn: its items are gathered and handed over together (see onAlbum).
      this.albums.add(`${msg.chat.id}:${msg.media_group_id}`, ctx.update);
      return;
    }
    if (this.config.mode === "webhook") return handler(await this.withParts(result.message, [msg]));
    // Chats side by side, each in order; the next getUpdates (which confirms the batch) waits
    // for all of them in pollGuard, so nothing is confirmed before it was accepted.
    const key = result.message.peerId;
    const run = (this.tails.get(key) ?? Promise.resolve())
      .then(async () => this.deliverWithRetry(handler, await this.withParts(result.message, [msg])))
      .catch((err: unknown) =>
        this.log.error({ err: errorMessage(err), updateId: ctx.update.update_id }, "telegram update failed"),
      );
    this.tails.set(key, run);
    void run.finally(() => {
      if (this.tails.get(key) === run) this.tails.delete(key);
    });
  }

  /**
   * The gathered items of one album as one InboundMessage: the captioned item's text, every
   * item's media in message order. Handed over with retries in both modes (the updates were
   * already acknowledged while the album gathered).
   */
  private async onAlbum(updates: Update[]): Promise<void> {
    const handler = this.life.handler;
    if (!handler) return;
    const me = this.bot.botInfo;
    const inCtx = { accountId: this.accountId, botId: me.id, botUsername: me.username };
    const items = updates
      .map((u) => ({
        msg: (u.message ?? u.channel_post) as Message,
        result: telegramUpdateToInbound(u, inCtx),
      }))
      .filter((x) => x.result.kind === "message")
      .sort((a, b) => a.msg.message_id - b.msg.message_id);
    const first = items.find((x) => x.msg.caption) ?? items[0];
    if (first?.result.kind !== "message") return;
    const base = first.result.message;
    const media = items.flatMap((x) => (x.result.kind === "message" ? x.result.message.media : []));
    const head = items[0]?.msg ?? first.msg;
    const message = await this.withParts(
      { ...base, messageId: String(head.message_id), media },
      items.map((x) => x.msg),
    );
    await this.deliverWithRetry(handler, message);
  }

  /** The message with its attachments taken by the app's media sink (when one is wired in). */
  private async withParts(message: InboundMessage, msgs: Message[]): Promise<InboundMessage> {
    const attachments = msgs.flatMap((m) => telegramAttachments(m, this.download));
    const parts = await takeAttachments(this.life.context, attachments, {
      channel: "telegram",
      accountId: this.accountId,
      maxBytes: megabytes(this.config.mediaMaxMb),
      signal: this.stopSignal.signal,
    });
    return parts ? { ...message, parts } : message;
  }

  private async deliverWithRetry(handler: InboundHandler, msg: InboundMessage): Promise<void> {
    await deliverWithRetry(handler, msg, this.config.inboundRetryDelaysMs, this.log, this.stopSignal.signal);
  }
}

/** Validates the account config (errors name `channels.telegram.accounts.<id>.<field>`). */
export function createTelegramChannel(
  config: TelegramChannelConfig,
  deps: TelegramChannelDeps,
): TelegramChannel {
  return new TelegramChannel(parseAccountConfig("telegram", telegramChannelConfigSchema, config), deps);
}
