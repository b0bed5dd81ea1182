import { chmod, mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { DisconnectReason, jidNormalizedUser } from "@whiskeysockets/baileys";
import { parseAccountConfig } from "../../src/channels/kit/config.js";
import { ConflictBackoff } from "../../src/channels/kit/conflict.js";
import { InboundQueue } from "../../src/channels/kit/inbound-retry.js";
import { ChannelLifecycle } from "../../src/channels/kit/lifecycle.js";
import { megabytes, takeAttachments } from "../../src/channels/kit/media.js";
import { messagesOf } from "../../src/channels/kit/text.js";
import type {
  AccountLease,
  AdapterContext,
  AuthStateStore,
  ChannelAdapter,
  ChannelCapabilities,
  ChannelStatus,
  InboundHandler,
  InboundMessage,
  OutboundMessage,
} from "../../src/channels/types.js";
import { errorMessage, SwitchboardError } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";
import { backoffDelayMs } from "../../src/retry/index.js";
import { migrateAuthDir } from "./auth.js";
import { statusCodeOf, toSwitchboardError } from "./errors.js";
import { toJid, type WhatsAppInboundContext, whatsappMessageToInbound } from "./inbound.js";
import { WHATSAPP_CAPTION_LIMIT, whatsappAttachments, whatsappMediaContents } from "./media.js";
import { baileysSocketFactory, qrInstructions, renderQr } from "./socket.js";
import {
  type ResolvedWhatsAppChannelConfig,
  type WhatsAppChannelConfig,
  type WhatsAppChannelDeps,
  type WhatsAppConnectionUpdate,
  type WhatsAppEvents,
  type WhatsAppSocket,
  type WhatsAppSocketFactory,
  type WhatsAppTimers,
  whatsappChannelConfigSchema,
} from "./types.js";

export type {
  WhatsAppChannelConfig,
  WhatsAppChannelDeps,
  WhatsAppSocket,
  WhatsAppSocketFactory,
  WhatsAppTimers,
} from "./types.js";

const realTimers: WhatsAppTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * One linked WhatsApp account over Baileys. The socket comes from an injectable factory.
 * Connection policy by disconnect reason: loggedOut → auth cleared, `needs-login`;
 * restartRequired → new socket at once; connectionReplaced (another socket on this login) →
 * reconnect with the conflict back-off (1 s doubling to 30 s, one warning a minute); anything
 * else → reconnect with doubling back-off.
 */
export class WhatsAppChannel implements ChannelAdapter {
  readonly channel = "whatsapp";
  readonly accountId: string;
  readonly capabilities: ChannelCapabilities = {
    textLimit: 4000,
    threads: false,
    typing: true,
    markdown: "whatsapp",
    createThread: false,
    media: { captionLimit: WHATSAPP_CAPTION_LIMIT, voiceNotes: true },
  };
  /** Where this account's Baileys credentials live (mode 0700). */
  readonly authDir: string;

  private readonly log: Logger;
  private readonly factory: WhatsAppSocketFactory;
  /** Where the auth state lives when not in `authDir` (redis storage). */
  private readonly authStore: AuthStateStore | undefined;
  private readonly timers: WhatsAppTimers;
  private readonly printQr: (qr: string) => void | Promise<void>;
  private readonly queue: InboundQueue;
  private socket: WhatsAppSocket | undefined;
  /** Bumped per socket and on stop: events from an older socket are ignored. */
  private generation = 0;
  private detach: (() => void) | undefined;
  private attempts = 0;
  private retryTimer: unknown;
  private settleStart: (() => void) | undefined;
  private normalizing: Promise<void> = Promise.resolve();
  /** Chats with a "composing" presence out; a send pauses it. */
  private readonly typingIn = new Set<string>();
  private readonly life: ChannelLifecycle;
  /** The current QR string while waiting to be linked. */
  private qr: string | undefined;
  private readonly conflicts: ConflictBackoff;

  constructor(
    private readonly config: ResolvedWhatsAppChannelConfig,
    deps: WhatsAppChannelDeps,
  ) {
    this.accountId = config.accountId;
    this.log = deps.logger.child({ channel: "whatsapp", accountId: config.accountId });
    this.factory = deps.socketFactory ?? baileysSocketFactory;
    this.authStore = deps.authStore;
    this.timers = deps.timers ?? realTimers;
    this.printQr = deps.printQr ?? defaultPrintQr(config.accountId);
    this.queue = new InboundQueue(config.inboundRetryDelaysMs, this.log);
    this.conflicts = new ConflictBackoff(
      this.log,
      "whatsapp connection replaced: another socket uses this login (a second gateway, or WhatsApp Web). " +
        'Several gateways need storage.driver "redis" (one holds the socket by lease); otherwise close the other session',
    );
    const authDir =
      config.authDir ?? (deps.stateDir && path.join(deps.stateDir, "whatsapp", config.accountId));
    if (!authDir) {
      throw new SwitchboardError(
        "CONFIG",
        `channels.whatsapp.accounts.${config.accountId}.authDir: not set and no stateDir to derive it from`,
        { details: { channel: "whatsapp", accountId: config.accountId } },
      );
    }
    this.authDir = path.resolve(authDir);
    this.life = new ChannelLifecycle("whatsapp", this.log, {
      connect: () => this.begin(),
      startError: (err) =>
        err instanceof SwitchboardError
          ? err
          : new SwitchboardError("UNAVAILABLE", `whatsapp start: ${errorMessage(err)}`, { cause: err }),
      disconnect: () => this.disconnect(),
      drain: async () => {
        await this.normalizing;
        await this.queue.drain();
        this.typingIn.clear();
      },
    });
  }

  /** `needs-login` carries the current QR string (or what to do) in `detail`. */
  status(): { state: ChannelStatus; detail?: string; qr?: string } {
    const qr = this.life.state === "needs-login" && this.qr ? { qr: this.qr } : {};
    return { ...this.life.status(), ...qr };
  }

  /** One socket per linked device: with many gateways one holds it (two log each other out). */
  readonly exclusive = true;
  /** The lease the socket runs under (many gateways): no socket is opened past its end. */
  private lease: AccountLease | undefined;

  /**
   * Resolves once the first connection attempt has an outcome: connected, a QR to scan
   * (`needs-login`), logged out, replaced, or reconnecting after a failure; at the latest after
   * `startTimeoutMs`. Rejects only when no socket can be created at all.
   */
  start(onInbound: InboundHandler, ctx?: AdapterContext): Promise<void> {
    this.lease = ctx?.lease;
    return this.life.start(onInbound, ctx);
  }

  stop(): Promise<void> {
    return this.life.stop();
  }

  async send(msg: OutboundMessage): Promise<{ messageIds: string[] }> {
    const jid = toJid(msg.to);
    const socket = this.connected("send");
    const limit = this.capabilities.textLimit;
    const ids: string[] = [];
    let texts = messagesOf(msg.text, limit);
    if (msg.attachments?.length) {
      const media = await whatsappMediaContents({ ...msg, attachments: msg.attachments }, limit);
      for (const content of media.contents) {
        let sent: Awaited<ReturnType<WhatsAppSocket["sendMessage"]>>;
        try {
          sent = await socket.sendMessage(jid, content);
        } catch (err) {
          throw toSwitchboardError(err, "sendMessage", this.config.rateLimitRetryAfterMs);
        }
        const id = sent?.key?.id;
        if (!id) throw new SwitchboardError("INTERNAL", "whatsapp sendMessage: no message id returned");
        ids.push(id);
      }
      texts = media.texts;
    }
    for (const text of texts) {
      let sent: Awaited<ReturnType<WhatsAppSocket["sendMessage"]>>;
      try {
        sent = await socket.sendMessage(jid, { text });
      } catch (err) {
        throw toSwitchboardError(err, "sendMessage", this.config.rateLimitRetryAfterMs);
      }
      const id = sent?.key?.id;
      if (!id) throw new SwitchboardError("INTERNAL", "whatsapp sendMessage: no message id returned");
      ids.push(id);
    }
    if (this.typingIn.delete(jid)) {
      await socket
        .sendPresenceUpdate("paused", jid)
        .catch((err: unknown) =>
          this.log.debug({ err: errorMessage(err) }, "whatsapp paused presence failed"),
        );
    }
    return { messageIds: ids };
  }

  /** "composing" in the chat; the next send to it (or WhatsApp after ~25 s) ends it. */
  async sendTyping(to: string): Promise<void> {
    const jid = toJid(to);
    const socket = this.connected("typing");
    try {
      await socket.sendPresenceUpdate("composing", jid);
      this.typingIn.add(jid);
    } catch (err) {
      throw toSwitchboardError(err, "sendPresenceUpdate", this.config.rateLimitRetryAfterMs);
    }
  }

  /** "paused": the turn ended (also on failure, when no message follows to end "composing"). */
  async stopTyping(to: string): Promise<void> {
    const jid = toJid(to);
    if (!this.typingIn.delete(jid)) return;
    try {
      await this.connected("typing").sendPresenceUpdate("paused", jid);
    } catch (err) {
      this.log.debug({ err: errorMessage(err) }, "whatsapp paused presence failed");
    }
  }

  // ------------------------------------------------------------------------------ connection

  private async begin(): Promise<void> {
    this.attempts = 0;
    if (this.authStore) await migrateAuthDir(this.authDir, this.authStore, this.log);
    else await ensurePrivateDir(this.authDir);
    const firstOutcome = new Promise<void>((resolve) => {
      this.settleStart = resolve;
    });
    const timeout = this.timers.setTimeout(() => this.settleStart?.(), this.config.startTimeoutMs);
    try {
      await this.openSocket();
      await firstOutcome;
    } finally {
      this.timers.clearTimeout(timeout);
      this.settleStart = undefined;
    }
  }

  /** Ends the socket and any reconnect wait; a start waiting for its first outcome settles now. */
  private disconnect(): void {
    this.cancelRetry();
    const socket = this.socket;
    this.dropSocket();
    try {
      socket?.end(undefined);
    } catch (err) {
      this.log.debug({ err: errorMessage(err) }, "whatsapp socket end failed");
    }
    this.settleStart?.();
  }

  private async openSocket(): Promise<void> {
    const generation = ++this.generation;
    if (this.lease && !this.lease.valid())
      throw new SwitchboardError(
        "UNAVAILABLE",
        "whatsapp: the lease on this account ended; not opening a socket",
      );
    const { socket, saveCreds } = await this.factory({
      authDir: this.authDir,
      logger: this.log,
      ...(this.authStore ? { authStore: this.authStore } : {}),
    });
    if (generation !== this.generation || this.life.stopping) {
      socket.end(undefined);
      return;
    }
    const current = () => generation === this.generation && !this.life.stopping;
    const onConnection = (u: WhatsAppEvents["connection.update"]) => {
      if (current()) this.onConnectionUpdate(u);
    };
    const onUpsert = (u: WhatsAppEvents["messages.upsert"]) => {
      if (current()) this.onUpsert(socket, u);
    };
    const onCreds = () => {
      saveCreds().catch((err: unknown) =>
        this.log.error(
          { err: errorMessage(err) },
          "whatsapp could not save credentials; the link may be lost",
        ),
      );
    };
    socket.ev.on("connection.update", onConnection);
    socket.ev.on("messages.upsert", onUpsert);
    socket.ev.on("creds.update", onCreds);
    this.socket = socket;
    this.detach = () => {
      socket.ev.off("connection.update", onConnection);
      socket.ev.off("messages.upsert", onUpsert);
      socket.ev.off("creds.update", onCreds);
    };
  }

  private onConnectionUpdate(u: WhatsAppConnectionUpdate): void {
    if (u.qr) {
      this.setState("needs-login", u.qr);
      this.qr = u.qr;
      this.log.warn("whatsapp needs to be linked: scan the QR code (terminal, or status detail)");
      void Promise.resolve(this.printQr(u.qr)).catch((err: unknown) =>
        this.log.warn({ err: errorMessage(err) }, "whatsapp could not print the QR code"),
      );
      this.settleStart?.();
    }
    if (u.connection === "open") {
      this.attempts = 0;
      this.conflicts.ok();
      this.setState("connected");
      this.log.info({ isNewLogin: u.isNewLogin === true }, "whatsapp connected");
      this.settleStart?.();
    } else if (u.connection === "close") {
      void this.onClose(u.lastDisconnect?.error);
    }
  }

  private async onClose(error: unknown): Promise<void> {
    const code = statusCodeOf(error);
    this.dropSocket();
    const reason = code !== undefined ? (DisconnectReason[code] ?? String(code)) : "unknown";
    if (code === DisconnectReason.loggedOut) {
      await this.logout().catch((err: unknown) =>
        this.log.error(
          { err: errorMessage(err), authDir: this.authDir },
          "whatsapp could not clear the saved login",
        ),
      );
      this.log.warn("whatsapp logged this device out; auth state cleared");
      this.setState(
        "needs-login",
        "WhatsApp logged this device out (unlinked on the phone?). The saved login was cleared; restart the " +
          "whatsapp channel and scan the new QR code to re-link.",
      );
      this.settleStart?.();
    } else if (code === DisconnectReason.connectionReplaced) {
      // Another socket on this login (a second gateway, WhatsApp Web): a conflict, never the end.
      const delay = this.conflicts.conflict("connection replaced (440)");
      this.setState(
        "reconnecting",
        `Another WhatsApp Web session with this login took over (connection replaced); retrying in ${delay} ms. ` +
          'Several gateways need storage.driver "redis" (one holds the socket by lease); otherwise close the other session.',
      );
      this.reconnect(delay);
      this.settleStart?.();
    } else if (code === DisconnectReason.restartRequired) {
      // Expected right after linking: WhatsApp restarts the stream and a fresh socket logs in.
      this.log.info("whatsapp asked for a restart; reconnecting now");
      this.reconnect(0);
    } else {
      const delay = backoffDelayMs(this.attempts, {
        baseDelayMs: this.config.reconnectBaseMs,
        maxDelayMs: this.config.reconnectMaxMs,
      });
      this.attempts++;
      this.log.warn({ reason, code, delayMs: delay, attempt: this.attempts }, "whatsapp connection closed");
      this.setState("reconnecting", `connection closed (${reason}); reconnecting in ${delay} ms`);
      this.reconnect(delay);
      this.settleStart?.();
    }
  }

  /**
   * Forgets the saved login (the auth dir's files, and the Redis keys with an auth store): the
   * next start shows a new QR code. `switchboard whatsapp logout` runs this with the channel stopped.
   */
  async logout(): Promise<void> {
    // With a store, a leftover auth dir is cleared too: the one-time migration would bring it back.
    await clearAuthState(this.authDir);
    if (this.authStore) await this.authStore.clear();
  }

  private reconnect(delayMs: number): void {
    this.cancelRetry();
    const run = () => {
      this.retryTimer = undefined;
      if (this.life.stopping) return;
      this.openSocket().catch((err: unknown) => {
        this.log.error({ err: errorMessage(err) }, "whatsapp could not create a socket");
        // Same policy as a dropped connection: try again later.
        void this.onClose(err);
      });
    };
    if (delayMs === 0) run();
    else this.retryTimer = this.timers.setTimeout(run, delayMs);
  }

  private cancelRetry(): void {
    if (this.retryTimer !== undefined) this.timers.clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private dropSocket(): void {
    this.detach?.();
    this.detach = undefined;
    this.socket = undefined;
    this.generation++;
  }

  private connected(action: string): WhatsAppSocket {
    const state = this.life.state;
    if (!this.socket || state !== "connected") {
      throw new SwitchboardError("UNAVAILABLE", `whatsapp ${action}: not connected (${state})`, {
        details: { channel: "whatsapp", state },
      });
    }
    return this.socket;
  }

  // ------------------------------------------------------------------------------ inbound

  /** Normalises in arrival order (LID lookups are async), then queues per chat. */
  private onUpsert(socket: WhatsAppSocket, update: WhatsAppEvents["messages.upsert"]): void {
    if (update.type !== "notify") return;
    const ctx: WhatsAppInboundContext = {
      accountId: this.accountId,
      self: {
        pn: socket.user?.id ? jidNormalizedUser(socket.user.id) : undefined,
        lid: socket.user?.lid ? jidNormalizedUser(socket.user.lid) : undefined,
      },
      lookupPn: socket.signalRepository?.lidMapping
        ? (lid) => socket.signalRepository?.lidMapping?.getPNForLID(lid) ?? Promise.resolve(null)
        : undefined,
    };
    this.normalizing = this.normalizing.then(async () => {
      for (const raw of update.messages) {
        const handler = this.life.handler;
        if (!handler || this.life.stopping) return;
        const result = await whatsappMessageToInbound(raw, ctx);
        if (result.kind === "ignored") this.log.debug({ reason: result.reason }, "whatsapp message ignored");
        else if (result.kind === "invalid") this.log.warn({ err: result.error }, "whatsapp message dropped");
        else {
          const message = result.message;
          void this.queue.push(message.peerId, () => this.withParts(message, raw, socket), handler);
        }
      }
    });
  }

  /** The message with its media taken by the app's media sink (when one is wired in). */
  private async withParts(
    message: InboundMessage,
    raw: unknown,
    socket: WhatsAppSocket,
  ): Promise<InboundMessage> {
    const reupload = socket.updateMediaMessage?.bind(socket);
    const parts = await takeAttachments(this.life.context, whatsappAttachments(raw, reupload), {
      channel: "whatsapp",
      accountId: this.accountId,
      maxBytes: megabytes(this.config.mediaMaxMb),
    });
    return parts ? { ...message, parts } : message;
  }

  private setState(state: ChannelStatus, detail?: string): void {
    this.life.set(state, detail);
    this.qr = undefined;
  }
}

/** Creates the folder (and parents) and makes it owner-only even if it existed before. */
async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
}

/** Removes Baileys' auth files (`creds.json`, `<type>-<id>.json`); nothing else in the folder is touched. */
async function clearAuthState(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(
    names.filter((n) => n.endsWith(".json")).map((n) => rm(path.join(dir, n), { force: true })),
  );
}

function defaultPrintQr(accountId: string): (qr: string) => Promise<void> {
  return async (qr) => {
    process.stderr.write(qrInstructions(accountId, qr, await renderQr(qr)));
  };
}

/**
 * Validates the account config (errors name `channels.whatsapp.accounts.<id>.<field>`).
 * `deps.stateDir` is needed when `authDir` is not set.
 */
export function createWhatsAppChannel(
  config: WhatsAppChannelConfig,
  deps: WhatsAppChannelDeps,
): WhatsAppChannel {
  return new WhatsAppChannel(parseAccountConfig("whatsapp", whatsappChannelConfigSchema, config), deps);
}
