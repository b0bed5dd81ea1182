import type { webApi } from "@slack/bolt";
import { BoundedMap } from "../../src/ordered-set.js";
import type { ChannelType } from "./inbound.js";

/**
 * What the adapter learns about users and conversations: display names (users.info),
 * conversation types for events without channel_type (conversations.info), and the DM
 * conversation of each user seen. Lookups are best effort: a failure yields undefined and is
 * not cached, so a missing scope only costs the name, never the message.
 */
export class SlackDirectory {
  private readonly names: BoundedMap<string, string | undefined>;
  private readonly types: BoundedMap<string, ChannelType>;
  private readonly dms: BoundedMap<string, string>;

  constructor(
    private readonly client: webApi.WebClient,
    size: number,
  ) {
    this.names = new BoundedMap(size);
    this.types = new BoundedMap(size);
    this.dms = new BoundedMap(size);
  }

  async userName(userId: string): Promise<string | undefined> {
    if (this.names.has(userId)) return this.names.get(userId);
    try {
      const res = await this.client.users.info({ user: userId });
      const u = res.user;
      const name = u?.profile?.display_name || u?.real_name || u?.name || undefined;
      this.names.set(userId, name);
      return name;
    } catch {
      return undefined;
    }
  }

  async channelType(channelId: string): Promise<ChannelType | undefined> {
    const known = this.types.get(channelId);
    if (known) return known;
    try {
      const c = (await this.client.conversations.info({ channel: channelId })).channel;
      if (!c) return undefined;
      const type: ChannelType = c.is_im ? "im" : c.is_mpim ? "mpim" : c.is_private ? "group" : "channel";
      this.types.set(channelId, type);
      return type;
    } catch {
      return undefined;
    }
  }

  rememberDm(userId: string, channelId: string): void {
    this.dms.set(userId, channelId);
  }

  dmChannelOf(userId: string): string | undefined {
    return this.dms.get(userId);
  }
}
