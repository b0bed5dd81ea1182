import type { webApi } from "@slack/bolt";
import { z } from "zod";
import { escapeSlack } from "../../src/channels/kit/format/index.js";
import { fetchPlatformFile, originOf, splitCaption } from "../../src/channels/kit/media.js";
import type { InboundAttachment, OutboundAttachment, OutboundMessage } from "../../src/channels/types.js";
import { SwitchboardError } from "../../src/errors.js";
import { toSwitchboardError } from "./errors.js";
import { postSlackMessage } from "./outbound.js";

type WebClient = webApi.WebClient;

/** `initial_comment` is message text: the same 4,000 characters the adapter sends per message. */
export const SLACK_CAPTION_LIMIT = 4000;

/** Where Slack serves `url_private(_download)` files when no `apiUrl` is configured. */
export const SLACK_FILE_ORIGIN = "https://files.slack.com";

/** The fields of a `file_share` event's file object read here (Slack Connect may send only `id`). */
const slackFileSchema = z.looseObject({
  id: z.string().min(1).optional(),
  name: z.string().optional(),
  title: z.string().optional(),
  mimetype: z.string().optional(),
  size: z.number().int().nonnegative().optional(),
  url_private: z.string().optional(),
  url_private_download: z.string().optional(),
  /** `slack_audio` / `slack_video`: a clip recorded in Slack (an audio clip is a voice note). */
  subtype: z.string().optional(),
  file_access: z.string().optional(),
});
type SlackFile = z.infer<typeof slackFileSchema>;

/**
 * The files of one message as attachments: one message with several files is one message with
 * several parts. Each is fetched with `Authorization: Bearer <bot token>` from its
 * `url_private_download` — but only from `allowedOrigins` (the configured Slack file host): a
 * forged URL pointing elsewhere never receives the token. A file object without a URL (Slack
 * Connect's `file_access: "check_file_info"`) is completed with `files.info` first.
 */
export function slackAttachments(
  files: unknown,
  opts: { client: WebClient; token: string; allowedOrigins: readonly string[] },
): InboundAttachment[] {
  const list = Array.isArray(files) ? files : [];
  const out: InboundAttachment[] = [];
  for (const raw of list) {
    const parsed = slackFileSchema.safeParse(raw);
    if (!parsed.success) continue;
    const f = parsed.data;
    const kind = kindOf(f.mimetype);
    out.push({
      kind,
      ...(kind === "audio" ? { voice: f.subtype === "slack_audio" } : {}),
      ...(f.mimetype ? { mimeType: f.mimetype } : {}),
      ...(f.name || f.title ? { name: f.name ?? f.title } : {}),
      ...(f.size !== undefined ? { bytes: f.size } : {}),
      open: async (signal) => {
        const url = f.url_private_download ?? f.url_private ?? (await fileInfoUrl(opts.client, f, signal));
        return fetchPlatformFile(url, {
          what: "slack file download",
          allowedOrigins: opts.allowedOrigins,
          signal,
          headers: { authorization: `Bearer ${opts.token}` },
        });
      },
    });
  }
  return out;
}

/** The origins file downloads may go to: the configured API host (a proxy or a test fake) or Slack's. */
export function slackFileOrigins(apiUrl: string | undefined): string[] {
  const api = apiUrl ? originOf(apiUrl) : undefined;
  return api ? [api] : [SLACK_FILE_ORIGIN];
}

async function fileInfoUrl(client: WebClient, f: SlackFile, signal: AbortSignal): Promise<string> {
  if (!f.id) throw new SwitchboardError("UNAVAILABLE", "slack file: neither a download URL nor an id");
  if (signal.aborted) throw signal.reason;
  try {
    const info = await client.files.info({ file: f.id });
    const url = info.file?.url_private_download ?? info.file?.url_private;
    if (!url) throw new SwitchboardError("UNAVAILABLE", `slack files.info ${f.id}: no download URL`);
    return url;
  } catch (err) {
    throw toSwitchboardError(err, "files.info");
  }
}

function kindOf(mimetype: string | undefined): InboundAttachment["kind"] {
  if (mimetype?.startsWith("image/")) return "image";
  if (mimetype?.startsWith("audio/")) return "audio";
  if (mimetype?.startsWith("video/")) return "video";
  return "file";
}

/**
 * `files.uploadV2` with every file in one call and the text as `initial_comment` (past the
 * caption limit the rest follows as messages). Slack has no voice bubble for bots: audio is a file
 * with a player. `channel` is a conversation id (a DM peer's DM channel). Returns the file ids.
 */
export async function uploadSlackFiles(
  client: WebClient,
  channel: string,
  msg: OutboundMessage & { attachments: OutboundAttachment[] },
  opts: { captionLimit: number; textLimit: number },
): Promise<string[]> {
  const text = msg.format === "native" ? msg.text : escapeSlack(msg.text);
  const { caption, rest } = splitCaption(text, opts.captionLimit, opts.textLimit);
  const uploads = await Promise.all(
    msg.attachments.map(async (a) => ({ file: await a.read(), filename: a.name, title: a.name })),
  );
  let ids: string[];
  try {
    const res = await client.files.uploadV2({
      channel_id: channel,
      ...(caption.trim() ? { initial_comment: caption } : {}),
      ...(msg.threadId ? { thread_ts: msg.threadId } : {}),
      file_uploads: uploads,
    });
    const done = ((res as { files?: unknown }).files ?? []) as Array<{ files?: Array<{ id?: string }> }>;
    ids = done.flatMap((r) => (r.files ?? []).map((f) => f.id ?? "")).filter(Boolean);
  } catch (err) {
    throw toSwitchboardError(err, "files.uploadV2");
  }
  for (const chunk of rest) {
    const { attachments: _files, ...plain } = msg;
    // Already escaped above: the rest goes as native text.
    ids.push(
      ...(await postSlackMessage(client, { ...plain, text: chunk, format: "native" }, opts.textLimit)),
    );
  }
  return ids;
}
