import { Readable } from "node:stream";
import type { MediaPart } from "../channels/types.js";
import type { MediaConfig } from "../config/media.js";
import type { ProviderConfig } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { MediaStore } from "./types.js";

/**
 * Text to speech for replies (API.md §8.2, `media.tts`): the provider's OpenAI-compatible
 * `POST <baseUrl>/audio/speech` with `response_format: "opus"`, the bytes streamed into the media
 * store. Errors are values: a failed synthesis never costs the text reply.
 */

/** OpenAI's `/audio/speech` takes at most this many characters of input. */
export const SPEECH_MAX_CHARS = 4096;
const SPEECH_TIMEOUT_MS = 60_000;

export type SpeechOutcome = { ok: true; mediaId: string } | { ok: false; reason: string };

export interface SpeechDeps {
  media: MediaConfig;
  providers: Record<string, ProviderConfig>;
  store: MediaStore;
  timeoutMs?: number;
}

/** Whether `media.tts.auto` asks for a voice note with this reply. */
export function wantsSpeech(auto: MediaConfig["tts"]["auto"], inboundParts: readonly MediaPart[]): boolean {
  if (auto === "always") return true;
  if (auto === "inbound") return inboundParts.some((p) => p.type === "audio" && p.voice === true);
  return false;
}

export async function synthesize(
  deps: SpeechDeps,
  text: string,
  signal?: AbortSignal,
): Promise<SpeechOutcome> {
  const cfg = deps.media.tts;
  const provider = deps.providers[cfg.provider];
  if (provider?.kind !== "openai")
    return {
      ok: false,
      reason: `media.tts.provider "${cfg.provider}" is not a configured openai-compatible provider`,
    };
  const base = (provider.baseUrl ?? "https://api.openai.com/v1").replace(/\/+$/, "");
  const timeout = AbortSignal.timeout(deps.timeoutMs ?? SPEECH_TIMEOUT_MS);
  try {
    const res = await fetch(`${base}/audio/speech`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(provider.headers ?? {}),
        ...(provider.apiKey ? { authorization: `Bearer ${provider.apiKey}` } : {}),
      },
      body: JSON.stringify({
        model: cfg.model,
        voice: cfg.voice,
        input: text.slice(0, SPEECH_MAX_CHARS),
        response_format: "opus",
      }),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    if (!res.ok || !res.body) {
      await res.body?.cancel().catch(() => undefined);
      return { ok: false, reason: `the speech service answered HTTP ${res.status}` };
    }
    const stored = await deps.store.put(Readable.fromWeb(res.body as never), {
      maxBytes: deps.media.maxBytes.audio,
      declaredType: "audio/ogg",
      name: "reply.ogg",
      signal: timeout,
    });
    return { ok: true, mediaId: stored.mediaId };
  } catch (err) {
    return { ok: false, reason: `speech failed: ${errorMessage(err)}` };
  }
}
