import { get as httpGet, type IncomingMessage } from "node:http";
import { get as httpsGet } from "node:https";
import { SwitchboardError } from "../../errors.js";
import type { AdapterContext, InboundAttachment, MediaPart } from "../types.js";
import { messagesOf } from "./text.js";

/**
 * What every adapter's media.ts shares (API.md §8.1–8.2): handing attachments to the app's sink,
 * fetching a platform file URL without leaking credentials to another host, and splitting a
 * caption at the platform's limit. Adapters never import src/media; the sink arrives in
 * `AdapterContext`.
 */

/** `channels.<name>.mediaMaxMb` (decimals allowed) in bytes. */
export function megabytes(mb: number): number {
  return Math.floor(mb * 1024 * 1024);
}

/**
 * The parts the app's media sink made of `attachments` (one per attachment, in order), or
 * undefined when there is nothing to take or no sink was wired in (the message then carries only
 * its `media` summary). The sink never throws; `signal` (the adapter stopping) cuts downloads short.
 */
export async function takeAttachments(
  ctx: AdapterContext,
  attachments: readonly InboundAttachment[],
  opts: { channel: string; accountId: string; maxBytes: number; signal?: AbortSignal },
): Promise<MediaPart[] | undefined> {
  if (!ctx.media || attachments.length === 0) return undefined;
  return ctx.media.take(attachments, opts);
}

/** The origin (`scheme://host:port`) of a URL, or undefined when it does not parse. */
export function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/**
 * GETs a platform file and hands back its body as a stream. Refuses, before any request, a URL
 * whose origin is not one of `allowedOrigins` (a forged file URL must never receive the bot's
 * token, nor make the gateway fetch an arbitrary host). Redirects are not followed (Slack answers
 * a bad token with a redirect to a sign-in page); anything but 200 with a non-HTML body fails.
 *
 * Over node:http(s), not the global fetch: undici's fetch copies every chunk twice on its way
 * into a web stream, so a 49 MiB video made ~150 MB of short-lived buffers, most of them
 * promoted before a scavenge freed them (the gateway's RSS rose 36–48 MB, and its CPU ~0.6 s,
 * for one video); here each socket read is the chunk the store writes.
 */
export async function fetchPlatformFile(
  url: string,
  opts: {
    what: string;
    allowedOrigins: readonly string[];
    signal: AbortSignal;
    headers?: Record<string, string>;
  },
): Promise<AsyncIterable<Uint8Array>> {
  const origin = originOf(url);
  if (!origin || !opts.allowedOrigins.includes(origin)) {
    throw new SwitchboardError(
      "FORBIDDEN",
      `${opts.what}: file URL host ${origin ?? "(unparsable)"} is not the platform's (${opts.allowedOrigins.join(", ")})`,
    );
  }
  const target = new URL(url);
  const get = target.protocol === "https:" ? httpsGet : target.protocol === "http:" ? httpGet : undefined;
  if (!get) throw new SwitchboardError("FORBIDDEN", `${opts.what}: ${target.protocol} is not http(s)`);
  opts.signal.throwIfAborted();
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = get(target, { signal: opts.signal, headers: opts.headers ?? {} }, resolve);
    req.once("error", (err) => reject(opts.signal.aborted ? opts.signal.reason : err));
  });
  const type = res.headers["content-type"] ?? "";
  if (res.statusCode !== 200 || /^text\/html/i.test(type)) {
    res.destroy();
    throw new SwitchboardError(
      "UNAVAILABLE",
      `${opts.what}: download answered ${res.statusCode}${/^text\/html/i.test(type) ? " with an HTML page (token or scope?)" : ""}`,
    );
  }
  return res;
}

/**
 * A text sent with files: the caption for the first file (at most `captionLimit`) and the messages
 * that carry the rest (each at most `textLimit`), so nothing is cut off.
 */
export function splitCaption(
  text: string,
  captionLimit: number,
  textLimit: number,
): { caption: string; rest: string[] } {
  if (text.length <= captionLimit) return { caption: text, rest: [] };
  const [caption = "", ...more] = messagesOf(text, captionLimit);
  const rest = more.join("\n");
  return { caption, rest: rest.trim() ? messagesOf(rest, textLimit) : [] };
}
