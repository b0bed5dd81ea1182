import {
  ChannelType,
  DiscordAPIError,
  escapeMarkdown,
  MessageFlags,
  type REST,
  RESTJSONErrorCodes,
  Routes,
} from "discord.js";
import { z } from "zod";
import { messagesOf } from "../../src/channels/kit/text.js";
import type { EditMessage, OutboundMessage } from "../../src/channels/types.js";
import { NotSupportedError, SwitchboardError } from "../../src/errors.js";
import { BoundedMap } from "../../src/ordered-set.js";
import { discordComponents } from "./actions.js";
import { toSwitchboardError } from "./errors.js";
import { postDiscordFiles } from "./media.js";

const created = z.looseObject({ id: z.string().min(1) });

export interface DiscordOutboundOptions {
  textLimit: number;
  suppressEmbeds: boolean;
  dmCacheSize: number;
}

/**
 * Outbound over plain REST, independent of the gateway connection (so a reply can go out
 * while the gateway is resuming). `to` is a channel id, or a user id for DMs: a DM peer is
 * the user, so the DM channel is looked up (remembered from inbound, else opened with
 * `POST /users/@me/channels` when Discord says the id is not a channel). `threadId` is the
 * thread's channel id and takes precedence over `to`.
 */
export class DiscordOutbound {
  /** user id → DM channel id, the least recently remembered dropped past `dmCacheSize`. */
  private readonly dms: BoundedMap<string, string>;

  constructor(
    private readonly rest: REST,
    private readonly opts: DiscordOutboundOptions,
  ) {
    this.dms = new BoundedMap(opts.dmCacheSize);
  }

  /** The bot's own identity (`GET /users/@me`): checks the token without opening the gateway. */
  async whoAmI(): Promise<{ id: string; username: string }> {
    const me = (await this.rest.get(Routes.user("@me"))) as { id?: string; username?: string };
    return { id: String(me.id ?? "?"), username: String(me.username ?? "?") };
  }

  rememberDm(userId: string, channelId: string): void {
    this.dms.set(userId, channelId);
  }

  /**
   * One POST per chunk. `native` text is Discord Markdown already; `plain` text is escaped so
   * it shows literally. Only user mentions ping (never @everyone or roles from model text).
   */
  async send(msg: OutboundMessage): Promise<string[]> {
    // Checked before anything is posted: an action Discord cannot carry fails the whole send.
    const components = msg.actions?.length ? discordComponents(msg.actions) : undefined;
    if (msg.attachments?.length) {
      const withFiles = { ...msg, attachments: msg.attachments };
      try {
        return await this.withTarget(msg.to, msg.threadId, (id) =>
          postDiscordFiles(this.rest, id, withFiles, {
            textLimit: this.opts.textLimit,
            ...(components ? { components } : {}),
          }),
        );
      } catch (err) {
        throw toSwitchboardError(err, "send files");
      }
    }
    const text = msg.format === "plain" ? escapeMarkdown(msg.text) : msg.text;
    const chunks = messagesOf(text, this.opts.textLimit);
    const ids: string[] = [];
    let channelId: string | undefined;
    for (const [i, content] of chunks.entries()) {
      const body = {
        content,
        allowed_mentions: { parse: ["users"] },
        ...(this.opts.suppressEmbeds ? { flags: MessageFlags.SuppressEmbeds } : {}),
        ...(i === 0 && msg.replyToMessageId
          ? { message_reference: { message_id: msg.replyToMessageId, fail_if_not_exists: false } }
          : {}),
        // Buttons go under the last chunk.
        ...(components && i === chunks.length - 1 ? { components } : {}),
      };
      const post = async (id: string) => {
        const res = created.parse(await this.rest.post(Routes.channelMessages(id), { body }));
        channelId = id;
        return res;
      };
      try {
        const res = channelId ? await post(channelId) : await this.withTarget(msg.to, msg.threadId, post);
        ids.push(res.id);
      } catch (err) {
        throw toSwitchboardError(err, "send message");
      }
    }
    return ids;
  }

  /**
   * `PATCH /channels/{id}/messages/{id}` with the new content (streaming previews). With
   * `actions` the buttons are replaced too (`actions: []` → `components: []` removes them);
   * without, they are left as they are.
   */
  async edit(msg: EditMessage): Promise<void> {
    const content = msg.format === "plain" ? escapeMarkdown(msg.text) : msg.text;
    const body = {
      content: content.slice(0, this.opts.textLimit),
      allowed_mentions: { parse: ["users"] },
      ...(msg.actions ? { components: discordComponents(msg.actions) } : {}),
    };
    try {
      await this.withTarget(msg.to, msg.threadId, (id) =>
        this.rest.patch(Routes.channelMessage(id, msg.messageId), { body }),
      );
    } catch (err) {
      throw toSwitchboardError(err, "edit message");
    }
  }

  async typing(to: string, threadId?: string): Promise<void> {
    try {
      await this.withTarget(to, threadId, (id) => this.rest.post(Routes.channelTyping(id)));
    } catch (err) {
      throw toSwitchboardError(err, "typing");
    }
  }

  /** A public thread under a text channel (no starter message); titles are cut to Discord's 100. */
  async createThread(to: string, title: string): Promise<{ threadId: string }> {
    if (this.dms.has(to)) throw notSupported(to);
    const name = title.trim().slice(0, 100) || "Thread";
    try {
      const res = created.parse(
        await this.rest.post(Routes.threads(to), {
          body: { name, type: ChannelType.PublicThread, auto_archive_duration: 1440 },
        }),
      );
      return { threadId: res.id };
    } catch (err) {
      // A user id (DM peer) is not a channel: DMs have no threads.
      if (isUnknownChannel(err)) throw notSupported(to);
      throw toSwitchboardError(err, "create thread");
    }
  }

  // ------------------------------------------------------------------------------ internals

  private async withTarget<T>(
    to: string,
    threadId: string | undefined,
    fn: (id: string) => Promise<T>,
  ): Promise<T> {
    if (threadId) return fn(threadId);
    const dm = this.dms.get(to);
    if (dm) return fn(dm);
    try {
      return await fn(to);
    } catch (err) {
      if (!isUnknownChannel(err)) throw err;
      const opened = await this.openDm(to).catch(() => undefined);
      if (!opened) {
        throw new SwitchboardError(
          "NOT_FOUND",
          `discord: ${to} is neither a channel nor a user the bot can DM`,
          {
            details: { channel: "discord", to },
            cause: err,
          },
        );
      }
      return fn(opened);
    }
  }

  private async openDm(userId: string): Promise<string> {
    const res = created.parse(
      await this.rest.post(Routes.userChannels(), { body: { recipient_id: userId } }),
    );
    this.rememberDm(userId, res.id);
    return res.id;
  }
}

function isUnknownChannel(err: unknown): boolean {
  return err instanceof DiscordAPIError && err.code === RESTJSONErrorCodes.UnknownChannel;
}

function notSupported(to: string): SwitchboardError {
  return new NotSupportedError("threads", `discord DM ${to} (threads need a server text channel)`);
}
