import { constants } from "node:fs";
import { lstat, open, realpath } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { errorMessage } from "../errors.js";
import { uuidFrom } from "../ids.js";
import { sanitizeFilename } from "../media/names.js";
import { MediaStoreError } from "../media/types.js";
import { resolveVisibleTarget, sendBlocked } from "../policy/access.js";
import type { Services } from "../services/index.js";
import { displayKey, isThreadKey, MAX_KEY_LENGTH } from "../sessions/keys.js";
import { childWorkspace } from "../subagents/children.js";
import { defineTool, type ToolCaller, type ToolResult } from "./types.js";

/**
 * `message` (API.md §8.2): text and files into the caller's chat, or another session's chat under
 * the send policy and visibility of `sessions_send` (the same checks, called, not copied). Files
 * are stored media (`{ mediaId }`) or paths inside the agent's workspace (`{ path }`: relative, no
 * `..`, no link out — else `forbidden` and nothing is sent). Delivery resolves the files from the
 * media store right before the send, through the outbox: a re-run never posts twice.
 */

const MAX_TEXT = 32_000;
const MAX_FILES = 10;

export const messageArgs = z
  .strictObject({
    text: z
      .string()
      .max(MAX_TEXT)
      .optional()
      .describe("The message text (the files' caption when there are files)."),
    attachments: z
      .array(
        z.union([
          z.strictObject({ mediaId: z.string().regex(/^sha256:[0-9a-f]{64}$/, "must be sha256:<64 hex>") }),
          z.strictObject({ path: z.string().min(1).max(4096) }),
        ]),
      )
      .max(MAX_FILES)
      .optional()
      .describe("Files to send: stored media ({ mediaId }) or a path relative to your workspace ({ path })."),
    asVoice: z.boolean().optional().describe("Send audio as a native voice note where the chat has them."),
    sessionKey: z
      .string()
      .min(1)
      .max(MAX_KEY_LENGTH)
      .optional()
      .describe("The session whose chat receives it (default: your own chat)."),
  })
  .superRefine((a, ctx) => {
    if (!a.text?.trim() && !a.attachments?.length)
      ctx.addIssue({ code: "custom", path: ["text"], message: "give text or attachments" });
  });

type Args = z.infer<typeof messageArgs>;

/** A workspace file as stored media, or a refusal. Never follows a link out of the workspace. */
async function storeWorkspaceFile(
  services: Services,
  caller: ToolCaller,
  rel: string,
): Promise<
  { ok: true; mediaId: string; name: string } | { ok: false; status: "forbidden" | "error"; error: string }
> {
  const media = services.media;
  if (!media) return { ok: false, status: "error", error: "this process has no media store" };
  const parts = rel.split(/[/\\]/);
  if (path.isAbsolute(rel) || /^[a-zA-Z]:/.test(rel) || parts.includes(".."))
    return {
      ok: false,
      status: "forbidden",
      error: `path ${JSON.stringify(rel)}: must be relative to your workspace, without ..`,
    };
  const ws = childWorkspace(services, caller.agentId, caller.entry?.sessionId ?? "none");
  let root: string;
  let real: string;
  try {
    root = await realpath(ws);
    real = await realpath(path.join(root, rel));
  } catch {
    return {
      ok: false,
      status: "error",
      error: `path ${JSON.stringify(rel)}: no such file in your workspace`,
    };
  }
  if (real !== root && !real.startsWith(root + path.sep))
    return {
      ok: false,
      status: "forbidden",
      error: `path ${JSON.stringify(rel)}: leads outside your workspace`,
    };
  const st = await lstat(real);
  if (!st.isFile()) return { ok: false, status: "error", error: `path ${JSON.stringify(rel)}: not a file` };
  const fh = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW);
  const name = sanitizeFilename(path.basename(rel)) ?? "file";
  try {
    const max = Math.max(...Object.values(services.config.media.maxBytes));
    const stored = await media.put(fh.createReadStream({ autoClose: false }), { maxBytes: max, name });
    return { ok: true, mediaId: stored.mediaId, name };
  } catch (err) {
    if (err instanceof MediaStoreError && err.reason === "too_large")
      return { ok: false, status: "error", error: `path ${JSON.stringify(rel)}: larger than media.maxBytes` };
    return { ok: false, status: "error", error: errorMessage(err) };
  } finally {
    await fh.close();
  }
}

export const messageTool = defineTool({
  name: "message",
  description: [
    "Send a message with text and/or files into your own chat (default) or another session's chat (`sessionKey`, same rules as sessions_send).",
    "`attachments`: stored media `{ mediaId }` (e.g. from a user's message) or a file of your workspace `{ path }` (relative, inside the workspace).",
    "Images go as photos, audio with `asVoice` as a voice note, everything else as a file; `text` is the caption.",
  ].join(" "),
  schema: () => messageArgs,
  async execute(args: Args, ctx): Promise<ToolResult> {
    const { services, caller } = ctx;
    let entry = caller.entry ?? (await services.store.sessions.get(caller.sessionKey));
    if (args.sessionKey !== undefined) {
      const r = await resolveVisibleTarget(services, caller, args.sessionKey);
      if (!r.ok) return { ...r.result, status: r.result.status === "forbidden" ? "forbidden" : "error" };
      entry = r.entry;
    }
    if (!entry) return { status: "error", error: "no session to send into" };
    const shownKey = displayKey(entry.key, caller.agentId);
    if (args.sessionKey !== undefined && isThreadKey(entry.key) && entry.key !== caller.sessionKey)
      return {
        status: "forbidden",
        error: "a thread session cannot be targeted; use the parent channel's key",
        sessionKey: shownKey,
      };
    const blocked = sendBlocked(services, entry);
    if (blocked) return { status: "forbidden", error: blocked, sessionKey: shownKey };

    const files: Array<{ mediaId: string; name?: string; voice?: boolean }> = [];
    for (const [i, a] of (args.attachments ?? []).entries()) {
      if ("path" in a) {
        const r = await storeWorkspaceFile(services, caller, a.path);
        if (!r.ok) return { status: r.status, error: `attachments[${i}].${r.error}` };
        files.push({ mediaId: r.mediaId, name: r.name, ...(args.asVoice ? { voice: true } : {}) });
      } else {
        if (!(await services.media?.stat(a.mediaId)))
          return { status: "error", error: `attachments[${i}].mediaId: no stored media ${a.mediaId}` };
        files.push({ mediaId: a.mediaId, ...(args.asVoice ? { voice: true } : {}) });
      }
    }
    const key =
      ctx.effectId ?? uuidFrom(`${caller.sessionKey}:message:${JSON.stringify(args)}:${Date.now()}`);
    const out = await services.delivery.deliver({
      sessionKey: entry.key,
      text: args.text ?? "",
      idempotencyKey: `message:${key}`,
      ...(files.length ? { attachments: files } : {}),
      traceparent: ctx.traceparent,
    });
    switch (out.status) {
      case "sent":
        return { status: "sent", messageIds: out.messageIds, sessionKey: shownKey };
      case "duplicate":
      case "handed-off":
        return { status: "sent", messageIds: [], sessionKey: shownKey };
      case "blocked":
        return { status: "forbidden", error: out.reason, sessionKey: shownKey };
      case "no-route":
        return { status: "error", error: out.reason, sessionKey: shownKey };
      default:
        return { status: "error", error: out.error, sessionKey: shownKey };
    }
  },
});
