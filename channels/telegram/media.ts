import { type Api, InputFile } from "grammy";
import type { Message } from "grammy/types";
import { telegramHtmlToPlain } from "../../src/channels/kit/format/index.js";
import { fetchPlatformFile, originOf, splitCaption } from "../../src/channels/kit/media.js";
import type { InboundAttachment, OutboundAttachment, OutboundMessage } from "../../src/channels/types.js";
import { SwitchboardError } from "../../src/errors.js";
import type { Logger } from "../../src/log.js";
import { isEntityParseError, toSwitchboardError } from "./errors.js";
import { messageIdOf, sendTelegramMessage, topicIdOf } from "./outbound.js";

/** Telegram's caption limit (photos, documents, voice, …), after entity parsing. */
export const TELEGRAM_CAPTION_LIMIT = 1024;
/** sendPhoto takes photos up to 10 MB; bigger images, and other image types, go as documents. */
const PHOTO_MAX_BYTES = 10 * 1024 * 1024;
const PHOTO_TYPES = new Set(["image/jpeg", "image/png", "image/webp"]);
/** sendVoice shows a voice bubble for OGG/Opus, MP3 and M4A; other audio goes as sendAudio. */
const VOICE_TYPES = /^audio\/(ogg|opus|mpeg|mp3|mp4|m4a|x-m4a|aac)\b/i;

/** Downloads one file by id through the SDK's getFile and the Bot API file URL. */
export type TelegramDownload = (fileId: string, signal: AbortSignal) => Promise<AsyncIterable<Uint8Array>>;

/**
 * `getFile`, then `GET <apiRoot>/file/bot<token>/<file_path>` as a stream. The token is only ever
 * sent to the configured Bot API root. A local Bot API server in `--local` mode answers an
 * absolute path on its own disk: that is refused (the gateway never reads a path it was handed).
 */
export function telegramDownloader(api: Api, apiRoot: string, token: string): TelegramDownload {
  const origin = originOf(apiRoot);
  return async (fileId, signal) => {
    let file: Awaited<ReturnType<Api["getFile"]>>;
    try {
      // grammY types its signal with the abort-controller polyfill; a native one works at runtime.
      file = await api.getFile(fileId, signal as Parameters<Api["getFile"]>[1]);
    } catch (err) {
      throw toSwitchboardError(err, "getFile");
    }
    const filePath = file.file_path;
    if (!filePath) throw new SwitchboardError("UNAVAILABLE", "telegram getFile: no file_path (file gone?)");
    if (filePath.startsWith("/") || filePath.split("/").includes(".."))
      throw new SwitchboardError("NOT_SUPPORTED", "telegram getFile: a local path, not a download path");
    const encoded = filePath.split("/").map(encodeURIComponent).join("/");
    return fetchPlatformFile(`${apiRoot}/file/bot${token}/${encoded}`, {
      what: "telegram file download",
      allowedOrigins: origin ? [origin] : [],
      signal,
    });
  };
}

/**
 * The attachments of one Telegram message, in the order the person sees them: a photo's largest
 * size, a voice note (`voice: true`), audio, video, a round video note, a document (or the
 * animation it stands for), a sticker. Sizes and types are what Telegram declares; nothing is
 * fetched until the sink opens one.
 */
export function telegramAttachments(msg: Message, download: TelegramDownload): InboundAttachment[] {
  const out: InboundAttachment[] = [];
  const add = (fileId: string, a: Omit<InboundAttachment, "open">, size: number | undefined): void => {
    out.push({
      ...a,
      ...(size !== undefined ? { bytes: size } : {}),
      open: (signal) => download(fileId, signal),
    });
  };
  const photo = msg.photo?.at(-1);
  if (photo)
    add(
      photo.file_id,
      { kind: "image", mimeType: "image/jpeg", width: photo.width, height: photo.height },
      photo.file_size,
    );
  if (msg.voice)
    add(
      msg.voice.file_id,
      {
        kind: "audio",
        voice: true,
        mimeType: msg.voice.mime_type ?? "audio/ogg",
        durationSeconds: msg.voice.duration,
      },
      msg.voice.file_size,
    );
  if (msg.audio)
    add(
      msg.audio.file_id,
      {
        kind: "audio",
        voice: false,
        mimeType: msg.audio.mime_type ?? "audio/mpeg",
        durationSeconds: msg.audio.duration,
        ...(msg.audio.file_name ? { name: msg.audio.file_name } : {}),
      },
      msg.audio.file_size,
    );
  if (msg.video)
    add(
      msg.video.file_id,
      {
        kind: "video",
        mimeType: msg.video.mime_type ?? "video/mp4",
        durationSeconds: msg.video.duration,
        width: msg.video.width,
        height: msg.video.height,
        ...(msg.video.file_name ? { name: msg.video.file_name } : {}),
      },
      msg.video.file_size,
    );
  if (msg.video_note)
    add(
      msg.video_note.file_id,
      { kind: "video", mimeType: "video/mp4", durationSeconds: msg.video_note.duration },
      msg.video_note.file_size,
    );
  // An animation message also carries `document`; take the file once.
  const doc = msg.animation ?? msg.document;
  if (doc)
    add(
      doc.file_id,
      {
        kind: msg.animation ? "video" : "file",
        ...(doc.mime_type ? { mimeType: doc.mime_type } : {}),
        ...(doc.file_name ? { name: doc.file_name } : {}),
      },
      doc.file_size,
    );
  const sticker = msg.sticker;
  if (sticker)
    add(
      sticker.file_id,
      {
        kind: "sticker",
        mimeType: sticker.is_animated
          ? "application/x-tgsticker"
          : sticker.is_video
            ? "video/webm"
            : "image/webp",
        width: sticker.width,
        height: sticker.height,
        ...(sticker.emoji ? { name: `sticker ${sticker.emoji}` } : {}),
      },
      sticker.file_size,
    );
  return out;
}

/**
 * Gathers the messages of an album (one `media_group_id`, each item its own update, no "album
 * complete" marker) and hands them over once no item came for `quietMs`, after `maxWaitMs` in
 * all, or at 10 items (Telegram's album maximum). Every wait is bounded; `flushAll` (stop) hands
 * over what is pending at once.
 */
export class AlbumGatherer<T> {
  private readonly open = new Map<
    string,
    { items: T[]; timer: NodeJS.Timeout | undefined; deadline: number }
  >();

  constructor(
    private readonly flush: (items: T[]) => void,
    private readonly quietMs: number,
    private readonly maxWaitMs: number,
    private readonly maxItems = 10,
  ) {}

  add(key: string, item: T): void {
    const now = Date.now();
    let album = this.open.get(key);
    if (album) clearTimeout(album.timer);
    else {
      album = { items: [], timer: undefined, deadline: now + this.maxWaitMs };
      this.open.set(key, album);
    }
    album.items.push(item);
    if (album.items.length >= this.maxItems) {
      this.done(key);
      return;
    }
    const wait = Math.max(0, Math.min(this.quietMs, album.deadline - now));
    album.timer = setTimeout(() => this.done(key), wait);
  }

  flushAll(): void {
    for (const key of [...this.open.keys()]) this.done(key);
  }

  private done(key: string): void {
    const album = this.open.get(key);
    if (!album) return;
    clearTimeout(album.timer);
    this.open.delete(key);
    this.flush(album.items);
  }
}

/**
 * Sends a message with files: images as photos, audio marked `voice` as a voice note (OGG/Opus,
 * MP3 or M4A), other audio as audio, video as video, the rest as documents, each from a fresh
 * stream of the stored bytes. The text is the first file's caption; past the caption limit the
 * rest follows as text messages. A caption whose HTML Telegram rejects is resent as plain text.
 */
export async function sendTelegramMedia(
  api: Api,
  msg: OutboundMessage & { attachments: OutboundAttachment[] },
  opts: { captionLimit: number; textLimit: number; logger: Logger },
): Promise<string[]> {
  const { caption, rest } = splitCaption(msg.text, opts.captionLimit, opts.textLimit);
  const topic = topicIdOf(msg.threadId);
  const ids: string[] = [];
  for (const [i, a] of msg.attachments.entries()) {
    const base = {
      ...(topic !== undefined && msg.threadId !== "1" ? { message_thread_id: topic } : {}),
      ...(i === 0 && msg.replyToMessageId
        ? {
            reply_parameters: {
              message_id: messageIdOf(msg.replyToMessageId),
              allow_sending_without_reply: true,
            },
          }
        : {}),
    };
    const text = i === 0 && caption.trim() ? caption : undefined;
    const send = async (plain: boolean) => {
      // A Node readable is an async iterable of chunks; grammY streams it into the multipart body.
      const file = new InputFile((await a.open()) as AsyncIterable<Uint8Array>, a.name);
      const other = {
        ...base,
        ...(text !== undefined
          ? plain || msg.format !== "native"
            ? { caption: plain ? telegramHtmlToPlain(text) : text }
            : { caption: text, parse_mode: "HTML" as const }
          : {}),
      };
      return sendOne(api, msg.to, a, file, other);
    };
    try {
      ids.push(String((await send(false)).message_id));
    } catch (err) {
      if (text === undefined || msg.format !== "native" || !isEntityParseError(err))
        throw toSwitchboardError(err, methodFor(a));
      opts.logger.warn({ to: msg.to }, "telegram rejected the caption markup; resending as plain text");
      try {
        ids.push(String((await send(true)).message_id));
      } catch (err2) {
        throw toSwitchboardError(err2, methodFor(a));
      }
    }
  }
  for (const text of rest) {
    const { attachments: _files, replyToMessageId: _reply, ...plainMsg } = msg;
    ids.push(...(await sendTelegramMessage(api, { ...plainMsg, text }, opts.textLimit, opts.logger)));
  }
  return ids;
}

type SendOther = {
  caption?: string;
  parse_mode?: "HTML";
  message_thread_id?: number;
  reply_parameters?: { message_id: number; allow_sending_without_reply: boolean };
};

/** Which Bot API method a file goes out with. */
export function methodFor(
  a: OutboundAttachment,
): "sendPhoto" | "sendVoice" | "sendAudio" | "sendVideo" | "sendDocument" {
  if (a.kind === "image" && PHOTO_TYPES.has(a.mimeType.toLowerCase()) && a.bytes <= PHOTO_MAX_BYTES)
    return "sendPhoto";
  if (a.kind === "audio") return a.voice && VOICE_TYPES.test(a.mimeType) ? "sendVoice" : "sendAudio";
  if (a.kind === "video") return "sendVideo";
  return "sendDocument";
}

function sendOne(api: Api, to: string, a: OutboundAttachment, file: InputFile, other: SendOther) {
  switch (methodFor(a)) {
    case "sendPhoto":
      return api.sendPhoto(to, file, other);
    case "sendVoice":
      return api.sendVoice(to, file, other);
    case "sendAudio":
      return api.sendAudio(to, file, other);
    case "sendVideo":
      return api.sendVideo(to, file, other);
    default:
      return api.sendDocument(to, file, other);
  }
}
