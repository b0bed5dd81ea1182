import { escapeMarkdown, type REST, type RESTPostAPIChannelMessageJSONBody, Routes } from "discord.js";
import { z } from "zod";
import { fetchPlatformFile, originOf, splitCaption } from "../../src/channels/kit/media.js";
import type { InboundAttachment, OutboundAttachment, OutboundMessage } from "../../src/channels/types.js";
import type { DiscordActionRow } from "./actions.js";
import type { DiscordMessageFacts } from "./inbound.js";

/** Discord's CDN and media proxy: where attachment URLs point. */
export const DISCORD_CDN_ORIGINS = ["https://cdn.discordapp.com", "https://media.discordapp.net"];
/** A caption is message content: 2,000 characters. */
export const DISCORD_CAPTION_LIMIT = 2000;
/** At most 10 files per message. */
const FILES_PER_MESSAGE = 10;

/** The CDN origins, plus the configured REST host's (a proxy or a test fake serves both). */
export function discordFileOrigins(apiUrl: string | undefined): string[] {
  const api = apiUrl ? originOf(apiUrl) : undefined;
  return api ? [...DISCORD_CDN_ORIGINS, api] : [...DISCORD_CDN_ORIGINS];
}

/**
 * A message's attachments: several files in one message are one message with several parts; the
 * one audio file of a voice message (flag IS_VOICE_MESSAGE) is a voice note. Each is fetched from
 * its URL without credentials, and only from the CDN (or the configured API host): a URL elsewhere
 * is refused before any request.
 */
export function discordAttachments(
  facts: DiscordMessageFacts,
  allowedOrigins: readonly string[],
): InboundAttachment[] {
  return facts.attachments.flatMap((a): InboundAttachment[] => {
    const url = a.url;
    if (!url) return [];
    const kind = kindOf(a.contentType);
    return [
      {
        kind,
        ...(kind === "audio" ? { voice: facts.voice === true } : {}),
        ...(a.contentType ? { mimeType: a.contentType } : {}),
        ...(a.name ? { name: a.name } : {}),
        ...(a.size !== undefined ? { bytes: a.size } : {}),
        ...(a.width ? { width: a.width } : {}),
        ...(a.height ? { height: a.height } : {}),
        ...(a.durationSeconds !== undefined ? { durationSeconds: a.durationSeconds } : {}),
        open: (signal) =>
          fetchPlatformFile(url, { what: "discord attachment download", allowedOrigins, signal }),
      },
    ];
  });
}

function kindOf(contentType: string | undefined): InboundAttachment["kind"] {
  if (contentType?.startsWith("image/")) return "image";
  if (contentType?.startsWith("audio/")) return "audio";
  if (contentType?.startsWith("video/")) return "video";
  return "file";
}

const created = z.looseObject({ id: z.string().min(1) });

/**
 * The REST bodies for a message with files: up to 10 files per message (`files[n]` parts beside
 * `payload_json`, as discord.js's AttachmentBuilder produces them), the text as the first
 * message's content (past 2,000 characters the rest follows as text). Discord's native voice
 * message needs a duration and waveform the gateway does not have, so audio goes as a file.
 */
export async function postDiscordFiles(
  rest: REST,
  channelId: string,
  msg: OutboundMessage & { attachments: OutboundAttachment[] },
  opts: { textLimit: number; components?: DiscordActionRow[] },
): Promise<string[]> {
  const text = msg.format === "plain" ? escapeMarkdown(msg.text) : msg.text;
  const { caption, rest: more } = splitCaption(text, DISCORD_CAPTION_LIMIT, opts.textLimit);
  const batches = Math.ceil(msg.attachments.length / FILES_PER_MESSAGE);
  // Buttons go under the last message posted.
  const buttonsAt = batches + more.length - 1;
  const withButtons = (n: number) =>
    n === buttonsAt && opts.components ? { components: opts.components } : {};
  const ids: string[] = [];
  for (let i = 0; i < msg.attachments.length; i += FILES_PER_MESSAGE) {
    const batch = msg.attachments.slice(i, i + FILES_PER_MESSAGE);
    const files = await Promise.all(
      batch.map(async (a) => ({ name: a.name, data: await a.read(), contentType: a.mimeType })),
    );
    const body: RESTPostAPIChannelMessageJSONBody = {
      ...(i === 0 && caption.trim() ? { content: caption } : {}),
      allowed_mentions: { parse: ["users"] as never },
      attachments: files.map((f, n) => ({ id: n, filename: f.name })),
      ...(i === 0 && msg.replyToMessageId
        ? { message_reference: { message_id: msg.replyToMessageId, fail_if_not_exists: false } }
        : {}),
      ...withButtons(i / FILES_PER_MESSAGE),
    };
    ids.push(created.parse(await rest.post(Routes.channelMessages(channelId), { body, files })).id);
  }
  for (const [n, content] of more.entries()) {
    const body = { content, allowed_mentions: { parse: ["users"] }, ...withButtons(batches + n) };
    ids.push(created.parse(await rest.post(Routes.channelMessages(channelId), { body })).id);
  }
  return ids;
}
