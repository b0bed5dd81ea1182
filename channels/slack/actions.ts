import { z } from "zod";
import { type InboundAction, inboundActionSchema, type OutboundAction } from "../../src/channels/types.js";
import { formatIssues } from "../../src/errors.js";

/** Slack caps: section text 3000 characters, button text 75, action_id 255. */
const SECTION_LIMIT = 3000;
const LABEL_LIMIT = 75;

/**
 * Block Kit for a message with buttons: the text as a `section`, then one `actions` block with a
 * button per action (`action_id` and `value` both carry the OutboundAction.id). `text` stays the
 * notification fallback. No actions (`actions: []` on an edit): the section alone, so the
 * buttons are gone.
 */
export function slackBlocks(
  text: string,
  mrkdwn: boolean,
  actions: readonly OutboundAction[],
): Array<Record<string, unknown>> {
  const section = {
    type: "section",
    text: { type: mrkdwn ? "mrkdwn" : "plain_text", text: text.slice(0, SECTION_LIMIT) || " " },
  };
  if (!actions.length) return [section];
  return [
    section,
    {
      type: "actions",
      block_id: "sb_actions",
      elements: actions.map((a) => ({
        type: "button",
        action_id: a.id,
        value: a.id,
        text: { type: "plain_text", text: a.label.slice(0, LABEL_LIMIT) },
        // Block Kit has primary and danger only; "success" reads as primary.
        ...(a.style === "danger" ? { style: "danger" } : a.style ? { style: "primary" } : {}),
      })),
    },
  ];
}

/** The fields of a `block_actions` interactive payload we read; everything else passes through. */
export const blockActionsSchema = z.looseObject({
  type: z.literal("block_actions"),
  user: z.looseObject({
    id: z.string().min(1),
    username: z.string().optional(),
    name: z.string().optional(),
  }),
  channel: z.looseObject({ id: z.string().min(1) }),
  message: z.looseObject({ ts: z.string().min(1), thread_ts: z.string().optional() }),
  response_url: z.string().optional(),
  actions: z
    .array(z.looseObject({ type: z.string(), action_id: z.string().min(1), value: z.string().optional() }))
    .min(1),
});

export type BlockActions = z.infer<typeof blockActionsSchema>;

/**
 * The JSON of a form-encoded interactive request (`payload=<json>`, Slack's Interactivity
 * Request URL format), or undefined when the body is not one.
 */
export function interactivePayload(rawBody: string): unknown {
  const payload = new URLSearchParams(rawBody).get("payload");
  if (payload === null) return undefined;
  try {
    return JSON.parse(payload) as unknown;
  } catch {
    return null;
  }
}

/**
 * A `block_actions` payload (a button press) → a validated InboundAction, or why not. In a DM
 * (D…) the peer is the presser, as on inbound messages; elsewhere the conversation. The pressed
 * button's `value` must equal its `action_id` (both are the id we sent).
 */
export function slackPressToAction(
  raw: unknown,
  accountId: string,
): { ok: true; action: InboundAction; payload: BlockActions } | { ok: false; error: string } {
  const parsed = blockActionsSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, error: formatIssues(parsed.error.issues, "block_actions.") };
  const p = parsed.data;
  const pressed = p.actions[0];
  if (pressed?.type !== "button") return { ok: false, error: "block_actions.actions[0]: not a button" };
  if (pressed.value !== undefined && pressed.value !== pressed.action_id)
    return { ok: false, error: "block_actions.actions[0].value: does not match action_id" };
  const direct = p.channel.id.startsWith("D");
  const thread = p.message.thread_ts !== undefined && p.message.thread_ts !== p.message.ts;
  const name = p.user.username ?? p.user.name;
  const action = inboundActionSchema.safeParse({
    channel: "slack",
    accountId,
    chatType: direct ? "direct" : "channel",
    peerId: direct ? p.user.id : p.channel.id,
    ...(thread ? { threadId: p.message.thread_ts } : {}),
    senderId: p.user.id,
    ...(name ? { senderName: name } : {}),
    messageId: p.message.ts,
    actionId: pressed.action_id,
  });
  if (!action.success) return { ok: false, error: formatIssues(action.error.issues, "block_actions.") };
  return { ok: true, action: action.data, payload: p };
}
