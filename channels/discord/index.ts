import { type ButtonInteraction, type Client, Events, type Message, MessageFlags } from "discord.js";
import { parseAccountConfig } from "../../src/channels/kit/config.js";
import { InboundQueue } from "../../src/channels/kit/inbound-retry.js";
import { ChannelLifecycle } from "../../src/channels/kit/lifecycle.js";
import { megabytes, takeAttachments } from "../../src/channels/kit/media.js";
import type {
  AdapterContext,
  ChannelAdapter,
  ChannelCapabilities,
  ChannelStatus,
  EditMessage,
  InboundAction,
  InboundHandler,
  InboundMessage,
  OutboundMessage,
} from "../../src/channels/types.js";
import { errorMessage, SwitchboardError } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";
import { within } from "../../src/retry/index.js";
import { discordPressToAction, pressOf } from "./actions.js";
import { createGatewayClient, createRest } from "./client.js";
import { toSwitchboardError } from "./errors.js";
import { type DiscordMessageFacts, discordMessageToInbound, factsOf } from "./inbound.js";
import { DISCORD_CAPTION_LIMIT, discordAttachments, discordFileOrigins } from "./media.js";
import { DiscordOutbound } from "./outbound.js";
import {
  type DiscordChannelConfig,
  type DiscordChannelDeps,
  discordChannelConfigSchema,
  type ResolvedDiscordChannelConfig,
} from "./types.js";

export type { DiscordChannelConfig, DiscordChannelDeps } from "./types.js";

/** Gateway close codes after which discord.js gives up, with what to do about them. */
const FATAL_CLOSE: Record<number, string> = {
  4004: "the gateway rejected the token (4004); reset it in the Developer Portal",
  4010: "invalid shard (4010)",
  4011: "sharding required (4011): this bot is in too many servers for one shard",
  4012: "invalid gateway API version (4012)",
  4013: "invalid intents (4013)",
  4014: 'disallowed intents (4014): enable "Message Content Intent" under Bot → Privileged Gateway Intents in the Developer Portal',
};

/**
 * One Discord bot over discord.js. Inbound comes from the gateway (MESSAGE_CREATE in DMs,
 * server text channels and threads); reconnects and session resumes are the SDK's and show
 * up in `status()`. Outbound goes over REST and works while the gateway is resuming.
 */
export class DiscordChannel implements ChannelAdapter {
  readonly channel = "discord";
  readonly accountId: string;
  readonly capabilities: ChannelCapabilities = {
    textLimit: 2000,
    threads: true,
    typing: true,
    markdown: "discord",
    // Public threads under server text channels; DMs answer NOT_SUPPORTED.
    createThread: true,
    // About 5 writes per 5 s per channel; discord.js queues and waits out 429s on top.
    streaming: { editIntervalMs: 1200, groupEditIntervalMs: 1200 },
    // A native voice message needs a duration and waveform; audio goes out as a file.
    media: { captionLimit: DISCORD_CAPTION_LIMIT, voiceNotes: false },
    // Message components; a press is an INTERACTION_CREATE (button), answered ephemerally.
    buttons: true,
  };

  private readonly log: Logger;
  private readonly outbound: DiscordOutbound;
  private readonly queue: InboundQueue;
  private client: Client | undefined;
  private botUserId: string | undefined;
  private abortStart: ((err: SwitchboardError) => void) | undefined;
  private readonly life: ChannelLifecycle;

  constructor(
    private readonly config: ResolvedDiscordChannelConfig,
    deps: DiscordChannelDeps,
  ) {
    this.accountId = config.accountId;
    this.log = deps.logger.child({ channel: "discord", accountId: config.accountId });
    this.outbound = new DiscordOutbound(createRest(config), {
      textLimit: this.capabilities.textLimit,
      suppressEmbeds: config.suppressEmbeds,
      dmCacheSize: config.dmCacheSize,
    });
    this.queue = new InboundQueue(config.inboundRetryDelaysMs, this.log);
    this.life = new ChannelLifecycle("discord", this.log, {
      connect: () => this.connect(),
      startError: (err) => toSwitchboardError(err, "start"),
      undoStart: async () => {
        await this.client?.destroy().catch(() => undefined);
        this.client = undefined;
      },
      disconnect: async () => {
        this.abortStart?.(new SwitchboardError("UNAVAILABLE", "discord: start aborted by stop()"));
        await this.client
          ?.destroy()
          .catch((err: unknown) =>
            this.log.warn({ err: errorMessage(err) }, "discord client destroy failed"),
          );
      },
      drain: async () => {
        await this.queue.drain();
        this.client = undefined;
      },
    });
  }

  status(): { state: ChannelStatus; detail?: string } {
    return this.life.status();
  }

  /** The gateway socket: with many gateways only one holds it (a second would get every event too). */
  readonly exclusive = true;

  start(onInbound: InboundHandler, ctx?: AdapterContext): Promise<void> {
    return this.life.start(onInbound, ctx);
  }

  stop(): Promise<void> {
    return this.life.stop();
  }

  async send(msg: OutboundMessage): Promise<{ messageIds: string[] }> {
    return { messageIds: await this.outbound.send(msg) };
  }

  async probe(): Promise<{ ok: boolean; detail: string }> {
    try {
      const me = await this.outbound.whoAmI();
      return { ok: true, detail: `users/@me: ${me.username} (id ${me.id})` };
    } catch (err) {
      return { ok: false, detail: `users/@me failed: ${toSwitchboardError(err, "users/@me").message}` };
    }
  }

  async sendTyping(to: string, threadId?: string): Promise<void> {
    await this.outbound.typing(to, threadId);
  }

  async edit(msg: EditMessage): Promise<void> {
    await this.outbound.edit(msg);
  }

  async createThread(to: string, title: string): Promise<{ threadId: string }> {
    return this.outbound.createThread(to, title);
  }

  // ------------------------------------------------------------------------------ internals

  private async connect(): Promise<void> {
    const client = createGatewayClient(this.config);
    this.client = client;
    this.watch(client);
    const ready = new Promise<void>((resolve, reject) => {
      client.once(Events.ClientReady, () => resolve());
      this.abortStart = reject;
    });
    try {
      await Promise.race([client.login(this.config.token), ready]);
      await ready;
    } finally {
      this.abortStart = undefined;
    }
    if (this.life.stopping) throw new SwitchboardError("UNAVAILABLE", "discord: start aborted by stop()");
    this.botUserId = client.user?.id;
    this.life.set("connected");
    this.log.info({ botUserId: this.botUserId }, "discord gateway ready");
  }

  /** Shard events → status; the SDK does the reconnecting and resuming itself. */
  private watch(client: Client): void {
    const live = () => this.client === client && !this.life.stopping;
    client.on(Events.MessageCreate, (message) => {
      if (live()) this.onMessage(message);
    });
    client.on(Events.InteractionCreate, (interaction) => {
      if (live() && interaction.isButton()) void this.life.track(this.onPress(interaction));
    });
    client.on(Events.ShardReconnecting, () => {
      if (live()) this.life.set("reconnecting", "gateway connection lost; reconnecting");
    });
    client.on(Events.ShardResume, () => {
      if (live() && this.life.state !== "starting") this.life.set("connected");
    });
    client.on(Events.ShardReady, () => {
      if (live() && this.life.state !== "starting") this.life.set("connected");
    });
    client.on(Events.ShardDisconnect, (event) => {
      if (!live()) return;
      const reason = FATAL_CLOSE[event.code] ?? `gateway closed with ${event.code}`;
      this.log.error({ code: event.code }, `discord gateway gave up: ${reason}`);
      this.life.set("error", `discord: ${reason}`);
    });
    client.on(Events.Invalidated, () => {
      if (live()) this.life.set("error", "discord: the gateway session was invalidated; restart the channel");
    });
    client.on(Events.ShardError, (err) => this.log.warn({ err: errorMessage(err) }, "discord gateway error"));
    client.on(Events.Warn, (warning) => this.log.warn({ warning }, "discord.js warning"));
    // An 'error' event without a listener would crash the process.
    client.on(Events.Error, (err) => this.log.error({ err: errorMessage(err) }, "discord.js error"));
  }

  /**
   * A button press: validated, handed to the gateway's press handler, and acknowledged through
   * discord.js — the notice as an ephemeral reply (flag 64: the presser alone sees it), or, with
   * no notice, a deferred update that changes nothing. Discord wants the acknowledgement within
   * 3 s: a handler slower than `pressAckWithinMs` gets a deferred ephemeral reply first, edited to
   * the notice when it comes. A forged or foreign press is refused by the handler; nothing runs.
   * An acknowledgement Discord refuses (a replayed or expired interaction) is logged, never thrown.
   */
  private async onPress(interaction: ButtonInteraction): Promise<void> {
    const parsed = discordPressToAction(pressOf(interaction), this.accountId);
    const notice: Promise<string | undefined> = parsed.ok
      ? this.noticeFor(parsed.action)
      : Promise.resolve("Refused: this button is not valid.");
    if (!parsed.ok) this.log.warn({ error: parsed.error }, "discord: button press refused");
    const ephemeral = (content: string) => ({
      content: content.slice(0, this.capabilities.textLimit),
      flags: MessageFlags.Ephemeral as const,
      allowedMentions: { parse: [] },
    });
    try {
      const early = await within(
        notice.then((text) => ({ text })),
        this.config.pressAckWithinMs,
      );
      if (early) {
        if (early.text) await interaction.reply(ephemeral(early.text));
        else await interaction.deferUpdate();
        return;
      }
      await interaction.deferReply({ flags: MessageFlags.Ephemeral });
      const text = await notice;
      await interaction.editReply({
        content: (text ?? "Done.").slice(0, this.capabilities.textLimit),
        allowedMentions: { parse: [] },
      });
    } catch (err) {
      this.log.warn(
        { interactionId: interaction.id, err: errorMessage(err) },
        "discord: interaction not acknowledged",
      );
    }
  }

  /** The gateway's answer to a press; a failing handler is a notice too, never a throw. */
  private async noticeFor(press: InboundAction): Promise<string | undefined> {
    const onAction = this.life.context.onAction;
    if (!onAction) return "Buttons are not handled here.";
    try {
      return (await onAction(press)).notice;
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, "discord: press handler failed");
      return "Something went wrong; try again.";
    }
  }

  /** The message with its attachments taken by the app's media sink (when one is wired in). */
  private async withParts(message: InboundMessage, facts: DiscordMessageFacts): Promise<InboundMessage> {
    const attachments = discordAttachments(facts, discordFileOrigins(this.config.apiUrl));
    const parts = await takeAttachments(this.life.context, attachments, {
      channel: "discord",
      accountId: this.accountId,
      maxBytes: megabytes(this.config.mediaMaxMb),
    });
    return parts ? { ...message, parts } : message;
  }

  private onMessage(message: Message): void {
    const handler = this.life.handler;
    const botUserId = this.botUserId ?? this.client?.user?.id;
    if (!handler || !botUserId) return;
    const result = discordMessageToInbound(factsOf(message), { accountId: this.accountId, botUserId });
    if (result.kind === "ignored") {
      this.log.debug({ messageId: message.id, reason: result.reason }, "discord message ignored");
      return;
    }
    if (result.kind === "invalid") {
      this.log.warn({ messageId: message.id, err: result.error }, "discord message dropped");
      return;
    }
    if (result.facts.kind === "dm") this.outbound.rememberDm(result.facts.authorId, result.facts.channelId);
    const { message: inbound, facts } = result;
    void this.queue.push(facts.channelId, () => this.withParts(inbound, facts), handler);
  }
}

/** Validates the account config (errors name `channels.discord.accounts.<id>.<field>`). */
export function createDiscordChannel(config: DiscordChannelConfig, deps: DiscordChannelDeps): DiscordChannel {
  return new DiscordChannel(parseAccountConfig("discord", discordChannelConfigSchema, config), deps);
}
