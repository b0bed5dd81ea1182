import {
  isJidBroadcast,
  isJidGroup,
  isJidNewsletter,
  isLidUser,
  jidDecode,
  jidNormalizedUser,
  normalizeMessageContent,
  type proto,
} from "@whiskeysockets/baileys";
import { z } from "zod";
import { type InboundMessage, inboundMessageSchema } from "../../src/channels/types.js";
import { formatIssues, InvalidParamsError } from "../../src/errors.js";

/** Who the linked account is, and how to map a LID to a phone number when the message does not say. */
export interface WhatsAppInboundContext {
  accountId: string;
  /** Own ids without device suffix: `<pn>@s.whatsapp.net` and `<lid>@lid`. */
  self: { pn?: string | undefined; lid?: string | undefined };
  lookupPn?: ((lid: string) => Promise<string | null>) | undefined;
}

export type InboundResult =
  | { kind: "message"; message: InboundMessage }
  | { kind: "ignored"; reason: string }
  | { kind: "invalid"; error: string };

type Media = InboundMessage["media"][number];

/**
 * The WAMessage fields read here. Baileys 7 puts the phone-number form of a LID sender in
 * `remoteJidAlt` (DMs) / `participantAlt` (groups); release candidates before rc10 used
 * `senderPn` / `participantPn`, which are still accepted.
 */
const waMessageSchema = z.looseObject({
  key: z.looseObject({
    remoteJid: z.string().min(1),
    fromMe: z.boolean().nullish(),
    id: z.string().min(1),
    participant: z.string().nullish(),
    remoteJidAlt: z.string().nullish(),
    participantAlt: z.string().nullish(),
    senderPn: z.string().nullish(),
    participantPn: z.string().nullish(),
  }),
  message: z.record(z.string(), z.unknown()).nullish(),
  messageTimestamp: z.unknown().optional(),
  pushName: z.string().nullish(),
});

/**
 * One `messages.upsert` (type notify) message → a validated InboundMessage.
 * - DMs (`@s.whatsapp.net` or `@lid`) are `direct` with the sender as peer; groups (`@g.us`)
 *   are `group` with the group JID as peer and the participant as sender.
 * - `senderId` is E.164 (`+<digits>`) whenever the phone number is known (the JID itself, its
 *   `…Alt` twin, or the LID mapping store), so E.164 allow-lists match LID senders; otherwise
 *   the bare LID JID.
 * - Mentions: `contextInfo.mentionedJid` naming the bot's phone JID or LID, or `@<its digits>`
 *   in the text (a leading one is removed). A quote of one of the bot's messages is `replyToBot`.
 * - Ignored: own messages, status and broadcast lists, newsletters, protocol messages
 *   (receipts, edits, deletes, reactions) and anything with neither text nor media.
 */
export async function whatsappMessageToInbound(
  raw: unknown,
  ctx: WhatsAppInboundContext,
): Promise<InboundResult> {
  const parsed = waMessageSchema.safeParse(raw);
  if (!parsed.success)
    return { kind: "invalid", error: formatIssues(parsed.error.issues, "whatsapp message: ") };
  const { key, pushName } = parsed.data;
  if (key.fromMe) return { kind: "ignored", reason: "own message" };
  const chat = key.remoteJid;
  if (isJidBroadcast(chat)) return { kind: "ignored", reason: "status or broadcast list" };
  if (isJidNewsletter(chat)) return { kind: "ignored", reason: "newsletter" };
  const group = isJidGroup(chat) === true;
  if (!group && !isUserJid(chat)) return { kind: "ignored", reason: `unsupported chat ${chat}` };

  const senderJid = group ? key.participant : chat;
  if (!senderJid)
    return { kind: "invalid", error: "whatsapp message: group message without key.participant" };
  const alts = group ? [key.participantAlt, key.participantPn] : [key.remoteJidAlt, key.senderPn];
  const senderId = await senderIdOf(senderJid, alts, ctx.lookupPn);
  if (isSelf(senderJid, ctx) || alts.some((a) => a && isSelf(a, ctx)))
    return { kind: "ignored", reason: "own message" };

  const content = normalizeMessageContent(parsed.data.message as proto.IMessage | null | undefined);
  if (!content) return { kind: "ignored", reason: "no content" };
  const { text: rawText, media, context } = partsOf(content);
  if (!rawText.trim() && media.length === 0) return { kind: "ignored", reason: "no text or media" };

  const selfDigits = [ctx.self.pn, ctx.self.lid]
    .map((j) => jidDecode(j)?.user)
    .filter((u): u is string => !!u);
  const mentioned =
    (context?.mentionedJid ?? []).some((j) => isSelf(j, ctx)) ||
    selfDigits.some((d) => new RegExp(`(^|\\W)@${d}(\\b|$)`).test(rawText));
  const leading = selfDigits.length ? new RegExp(`^\\s*@(${selfDigits.join("|")})\\b[\\s,:]*`) : undefined;
  const text = leading ? rawText.replace(leading, "") : rawText;
  const replyToBot = !!context?.participant && !!context.stanzaId && isSelf(context.participant, ctx);

  const candidate = {
    channel: "whatsapp",
    accountId: ctx.accountId,
    chatType: group ? "group" : "direct",
    peerId: group ? chat : senderId,
    senderId,
    ...(pushName ? { senderName: pushName } : {}),
    text,
    messageId: key.id,
    wasMentioned: mentioned,
    replyToBot,
    media,
    ...timestampOf(parsed.data.messageTimestamp),
  };
  const checked = inboundMessageSchema.safeParse(candidate);
  if (!checked.success)
    return { kind: "invalid", error: formatIssues(checked.error.issues, "whatsapp inbound: ") };
  return { kind: "message", message: checked.data };
}

/** Outbound `to` → JID: an E.164 number (with or without +) or any JID as is. */
export function toJid(to: string): string {
  const t = to.trim();
  if (/^\+?\d{5,16}$/.test(t)) return `${t.replace(/^\+/, "")}@s.whatsapp.net`;
  if (/^[^@\s]+@[a-z.]+$/.test(t)) return t;
  throw new InvalidParamsError(
    `to: expected an E.164 number (+4915…) or a WhatsApp JID (…@g.us, …@s.whatsapp.net, …@lid), got "${to}"`,
    { field: "to" },
  );
}

// ------------------------------------------------------------------------------ internals

function isUserJid(jid: string): boolean {
  return /@(s\.whatsapp\.net|c\.us|lid|hosted|hosted\.lid)$/.test(jid);
}

function isPhoneJid(jid: string): boolean {
  return /@(s\.whatsapp\.net|c\.us|hosted)$/.test(jid);
}

function e164Of(jid: string): string | undefined {
  const user = jidDecode(jid)?.user;
  return user && /^\d{5,16}$/.test(user) ? `+${user}` : undefined;
}

async function senderIdOf(
  jid: string,
  alts: Array<string | null | undefined>,
  lookupPn: WhatsAppInboundContext["lookupPn"],
): Promise<string> {
  const candidates = [jid, ...alts].filter((j): j is string => !!j);
  for (const c of candidates) {
    const pn = isPhoneJid(c) ? e164Of(c) : undefined;
    if (pn) return pn;
  }
  const lid = candidates.find((c) => isLidUser(c));
  if (lid && lookupPn) {
    const pn = await lookupPn(jidNormalizedUser(lid)).catch(() => null);
    const e164 = pn ? e164Of(pn) : undefined;
    if (e164) return e164;
  }
  return jidNormalizedUser(lid ?? jid);
}

function isSelf(jid: string, ctx: WhatsAppInboundContext): boolean {
  const n = jidNormalizedUser(jid);
  return !!n && (n === ctx.self.pn || n === ctx.self.lid);
}

function partsOf(content: proto.IMessage): {
  text: string;
  media: Media[];
  context: proto.IContextInfo | undefined;
} {
  const media: Media[] = [];
  let text = content.conversation ?? "";
  let context: proto.IContextInfo | null | undefined;
  const ext = content.extendedTextMessage;
  if (ext) {
    text ||= ext.text ?? "";
    context = ext.contextInfo;
  }
  const image = content.imageMessage;
  if (image) {
    media.push({ kind: "image" });
    text ||= image.caption ?? "";
    context ??= image.contextInfo;
  }
  const video = content.videoMessage;
  if (video) {
    media.push({ kind: "video" });
    text ||= video.caption ?? "";
    context ??= video.contextInfo;
  }
  if (content.audioMessage) {
    media.push({ kind: "audio" });
    context ??= content.audioMessage.contextInfo;
  }
  const doc = content.documentMessage;
  if (doc) {
    media.push(doc.fileName ? { kind: "file", name: doc.fileName } : { kind: "file" });
    text ||= doc.caption ?? "";
    context ??= doc.contextInfo;
  }
  if (content.stickerMessage) {
    media.push({ kind: "sticker" });
    context ??= content.stickerMessage.contextInfo;
  }
  return { text, media, context: context ?? undefined };
}

/** `messageTimestamp` is seconds, as a number or a protobuf Long. */
function timestampOf(ts: unknown): { timestamp?: number } {
  let seconds: number | undefined;
  if (typeof ts === "number") seconds = ts;
  else if (typeof ts === "string") seconds = Number(ts);
  else if (ts && typeof ts === "object" && typeof (ts as { toNumber?: unknown }).toNumber === "function")
    seconds = (ts as { toNumber: () => number }).toNumber();
  return seconds && Number.isFinite(seconds) && seconds > 0 ? { timestamp: seconds * 1000 } : {};
}
