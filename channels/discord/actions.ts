import {
  type APIActionRowComponent,
  type APIButtonComponentWithCustomId,
  type ButtonInteraction,
  ButtonStyle,
  ChannelType,
  ComponentType,
} from "discord.js";
import { z } from "zod";
import { type InboundAction, inboundActionSchema, type OutboundAction } from "../../src/channels/types.js";
import { formatIssues, InvalidParamsError } from "../../src/errors.js";

/** Discord's caps on message components: custom_id 1–100 characters, label 80, 5 buttons a row, 5 rows. */
export const CUSTOM_ID_LIMIT = 100;
export const LABEL_LIMIT = 80;
export const BUTTONS_PER_ROW = 5;
export const ROWS_PER_MESSAGE = 5;

const STYLE: Record<NonNullable<OutboundAction["style"]>, APIButtonComponentWithCustomId["style"]> = {
  primary: ButtonStyle.Primary,
  success: ButtonStyle.Success,
  danger: ButtonStyle.Danger,
};

export type DiscordActionRow = APIActionRowComponent<APIButtonComponentWithCustomId>;

/**
 * Buttons as message components: action rows (type 1) of up to five buttons (type 2) each, in
 * order, `custom_id` = the action id. A label past 80 characters is cut with "…"; an id Discord
 * cannot carry (empty, past 100 characters, or twice in one message) or more than 25 buttons is
 * refused with INVALID_PARAMS naming the field, since a cut id would come back as another one.
 * No actions (`actions: []` on an edit): no rows, so the buttons are removed.
 */
export function discordComponents(actions: readonly OutboundAction[]): DiscordActionRow[] {
  const max = BUTTONS_PER_ROW * ROWS_PER_MESSAGE;
  if (actions.length > max)
    throw new InvalidParamsError(
      `actions: ${actions.length} buttons, Discord takes at most ${max} (5 rows of 5)`,
    );
  const seen = new Set<string>();
  const buttons = actions.map((a, i): APIButtonComponentWithCustomId => {
    if (!a.id || a.id.length > CUSTOM_ID_LIMIT)
      throw new InvalidParamsError(
        `actions[${i}].id: must be 1–${CUSTOM_ID_LIMIT} characters for a Discord custom_id (got ${a.id.length})`,
      );
    if (seen.has(a.id))
      throw new InvalidParamsError(`actions[${i}].id: "${a.id}" is used twice in one message`);
    seen.add(a.id);
    const label = a.label.trim();
    if (!label) throw new InvalidParamsError(`actions[${i}].label: empty`);
    return {
      type: ComponentType.Button,
      custom_id: a.id,
      label: label.length > LABEL_LIMIT ? `${label.slice(0, LABEL_LIMIT - 1)}…` : label,
      style: a.style ? STYLE[a.style] : ButtonStyle.Secondary,
    };
  });
  const rows: DiscordActionRow[] = [];
  for (let i = 0; i < buttons.length; i += BUTTONS_PER_ROW)
    rows.push({ type: ComponentType.ActionRow, components: buttons.slice(i, i + BUTTONS_PER_ROW) });
  return rows;
}

/**
 * What a press reads from one discord.js ButtonInteraction, as plain data (so the mapping below is
 * testable without the SDK's object graph). Everything here is what the platform said: untrusted.
 */
export const discordPressSchema = z.strictObject({
  interactionId: z.string().min(1),
  customId: z.string().min(1).max(CUSTOM_ID_LIMIT),
  userId: z.string().min(1),
  userName: z.string().min(1).optional(),
  /** The chat the button was pressed in (the thread itself for a thread). */
  channelId: z.string().min(1),
  kind: z.enum(["dm", "group-dm", "guild", "thread"]),
  /** Thread presses: the channel the thread hangs off. */
  parentId: z.string().min(1).optional(),
  /** The message that carries the buttons. */
  messageId: z.string().min(1),
});

export type DiscordPress = z.infer<typeof discordPressSchema>;

/** The press facts of a button interaction (validated by `discordPressToAction`). */
export function pressOf(i: ButtonInteraction): Record<string, unknown> {
  const channel = i.channel;
  const kind =
    channel?.type === ChannelType.DM
      ? "dm"
      : channel?.type === ChannelType.GroupDM
        ? "group-dm"
        : channel?.isThread()
          ? "thread"
          : // an uncached channel: a guild id says which
            i.guildId
            ? "guild"
            : "dm";
  const member = i.member;
  const name =
    (member && "displayName" in member ? member.displayName : (member?.nick ?? undefined)) ??
    i.user.globalName ??
    i.user.username;
  return {
    interactionId: i.id,
    customId: i.customId,
    userId: i.user.id,
    ...(name ? { userName: name } : {}),
    channelId: i.channelId,
    kind,
    ...(channel?.isThread() && channel.parentId ? { parentId: channel.parentId } : {}),
    messageId: i.message?.id,
  };
}

/**
 * A button press → a validated InboundAction, or why not, mapped as inbound messages are: in a DM
 * the peer is the presser (`direct`); in a server channel the channel (`channel`); in a thread
 * the parent channel with `threadId` = the thread. The gateway checks the rest (whose button,
 * which chat, already decided).
 */
export function discordPressToAction(
  raw: unknown,
  accountId: string,
): { ok: true; action: InboundAction; press: DiscordPress } | { ok: false; error: string } {
  const parsed = discordPressSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, error: formatIssues(parsed.error.issues, "interaction.") };
  const p = parsed.data;
  if (p.kind === "thread" && !p.parentId)
    return { ok: false, error: "interaction.parentId: thread without parent" };
  const thread = p.kind === "thread" ? p.parentId : undefined;
  const action = inboundActionSchema.safeParse({
    channel: "discord",
    accountId,
    chatType: p.kind === "dm" ? "direct" : p.kind === "group-dm" ? "group" : "channel",
    peerId: p.kind === "dm" ? p.userId : (thread ?? p.channelId),
    ...(thread ? { threadId: p.channelId } : {}),
    senderId: p.userId,
    ...(p.userName ? { senderName: p.userName } : {}),
    messageId: p.messageId,
    actionId: p.customId,
  });
  if (!action.success) return { ok: false, error: formatIssues(action.error.issues, "interaction.") };
  return { ok: true, action: action.data, press: p };
}
