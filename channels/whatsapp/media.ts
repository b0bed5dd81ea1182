import {
  downloadMediaMessage,
  normalizeMessageContent,
  type proto,
  type WAMessage,
} from "@whiskeysockets/baileys";
import { splitCaption } from "../../src/channels/kit/media.js";
import type { InboundAttachment, OutboundAttachment, OutboundMessage } from "../../src/channels/types.js";
import { statusCodeOf } from "./errors.js";

/** WhatsApp captions: no documented limit below the 4,000-character message we send. */
export const WHATSAPP_CAPTION_LIMIT = 1024;

/** Asks the phone to re-upload expired media (Baileys `sock.updateMediaMessage`). */
export type ReuploadRequest = (msg: WAMessage) => Promise<WAMessage>;

function num(v: unknown): number | undefined {
  if (typeof v === "number") return v;
  if (v && typeof v === "object" && typeof (v as { toNumber?: unknown }).toNumber === "function")
    return (v as { toNumber: () => number }).toNumber();
  return undefined;
}

/**
 * The media of one WAMessage (image, audio — `ptt` is a voice note —, video, round video note,
 * document, sticker), downloaded and decrypted by Baileys' own `downloadMediaMessage` as a stream,
 * aborted by the sink's signal. Media the CDN expired (404/410) is asked for again from the phone
 * once (`updateMediaMessage`), which Baileys rc14's own `reuploadRequest` never does.
 */
export function whatsappAttachments(
  raw: unknown,
  reupload: ReuploadRequest | undefined,
): InboundAttachment[] {
  const msg = raw as WAMessage;
  const content = normalizeMessageContent(msg.message as proto.IMessage | null | undefined);
  if (!content) return [];
  const open = (signal: AbortSignal) => download(msg, signal, reupload);
  const out: InboundAttachment[] = [];
  const base = (m: { mimetype?: string | null; fileLength?: unknown }) => {
    const bytes = num(m.fileLength);
    return {
      ...(m.mimetype ? { mimeType: m.mimetype } : {}),
      ...(bytes !== undefined ? { bytes } : {}),
      open,
    };
  };
  if (content.imageMessage) {
    const m = content.imageMessage;
    out.push({
      kind: "image",
      ...base(m),
      ...(m.width ? { width: m.width } : {}),
      ...(m.height ? { height: m.height } : {}),
    });
  }
  if (content.audioMessage) {
    const m = content.audioMessage;
    out.push({
      kind: "audio",
      voice: m.ptt === true,
      ...base(m),
      ...(m.seconds ? { durationSeconds: m.seconds } : {}),
    });
  }
  const video = content.videoMessage ?? content.ptvMessage;
  if (video)
    out.push({ kind: "video", ...base(video), ...(video.seconds ? { durationSeconds: video.seconds } : {}) });
  if (content.documentMessage) {
    const m = content.documentMessage;
    out.push({ kind: "file", ...base(m), ...(m.fileName ? { name: m.fileName } : {}) });
  }
  if (content.stickerMessage) out.push({ kind: "sticker", ...base(content.stickerMessage) });
  return out;
}

async function download(
  msg: WAMessage,
  signal: AbortSignal,
  reupload: ReuploadRequest | undefined,
): Promise<AsyncIterable<Uint8Array>> {
  const get = (m: WAMessage) => downloadMediaMessage(m, "stream", { options: { signal } });
  try {
    return await get(msg);
  } catch (err) {
    const status = statusCodeOf(err);
    if (!reupload || (status !== 404 && status !== 410)) throw err;
    return get(await reupload(msg));
  }
}

/** The `sock.sendMessage` content for one file: photos, voice notes (ptt, OGG/Opus), video, documents. */
export type WhatsAppMediaContent =
  | { image: Buffer; caption?: string; mimetype: string }
  | { audio: Buffer; ptt: boolean; mimetype: string }
  | { video: Buffer; caption?: string; mimetype: string }
  | { document: Buffer; caption?: string; mimetype: string; fileName: string };

/**
 * What a message with files sends: each file as its own WhatsApp message (images as photos, audio
 * with `voice` as a voice note — `ptt: true`, `audio/ogg; codecs=opus` —, video, the rest as
 * documents with their name), the text as the first captionable file's caption; past the caption
 * limit (or with only audio) the rest goes as text messages.
 */
export async function whatsappMediaContents(
  msg: OutboundMessage & { attachments: OutboundAttachment[] },
  textLimit: number,
): Promise<{ contents: WhatsAppMediaContent[]; texts: string[] }> {
  const { caption, rest } = splitCaption(msg.text, WHATSAPP_CAPTION_LIMIT, textLimit);
  let captionLeft = caption.trim() ? caption : undefined;
  const contents: WhatsAppMediaContent[] = [];
  for (const a of msg.attachments) {
    const data = await a.read();
    const cap = () => {
      const c = captionLeft;
      captionLeft = undefined;
      return c !== undefined ? { caption: c } : {};
    };
    if (a.kind === "image") contents.push({ image: data, mimetype: a.mimeType, ...cap() });
    else if (a.kind === "audio")
      contents.push(
        a.voice
          ? { audio: data, ptt: true, mimetype: "audio/ogg; codecs=opus" }
          : { audio: data, ptt: false, mimetype: a.mimeType },
      );
    else if (a.kind === "video") contents.push({ video: data, mimetype: a.mimeType, ...cap() });
    else contents.push({ document: data, mimetype: a.mimeType, fileName: a.name, ...cap() });
  }
  return { contents, texts: [...(captionLeft !== undefined ? [captionLeft] : []), ...rest] };
}
