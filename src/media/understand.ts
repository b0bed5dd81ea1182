import type { Metadata } from "sharp";
import type { MediaPart } from "../channels/types.js";
import type { MediaConfig } from "../config/media.js";
import type { ProviderConfig } from "../config/schema.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";
import { extensionOf, isTextType } from "./sniff.js";
import type { MediaStore, PictureContent } from "./types.js";

/**
 * What the model is shown of each attachment (API.md §8.1): voice notes and audio transcribed
 * through the provider's OpenAI-compatible `/audio/transcriptions`, documents (PDF, DOCX, text,
 * Markdown, CSV, JSON) extracted to text capped at `maxChars`, images read and resized so the
 * longer side is ≤ `maxSide`. Every result is cached by mediaId (a prompt rebuild redoes
 * nothing); every failure is a value with its reason, never a throw; every step is bounded in
 * time and size (a corrupt PDF, a zip bomb, a lying type end as a note).
 */

export interface UnderstandingDeps {
  store: MediaStore;
  media: MediaConfig;
  providers: Record<string, ProviderConfig>;
  logger: Logger;
  /** Transcription and extraction time limits (tests shorten them). */
  transcribeTimeoutMs?: number;
  extractTimeoutMs?: number;
}

export type Outcome<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * An outcome that is an error thrown on the way (a store or provider failing, a timeout), not an
 * answer about the file, is asked again after this long: a picture whose read failed once went
 * to the model as a note for as long as its failure stayed cached.
 */
const RETRY_FAILED_MS = 30_000;
/** When each such failure may be asked again. */
const failedUntil = new WeakMap<object, number>();

/** How a picture goes to a vision model: its type, its content, until when it is stored. */
export interface PictureDecision extends PictureContent {
  mimeType: string;
  /** When the stored file passes `media.store.retention` (epoch ms). */
  expiresAt: number;
  /** The resized bytes' key in the cache, for a picture sent resized. */
  resized?: string;
}

const PDF = "application/pdf";
const DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
/** A DOCX whose parts inflate past this is refused before it is read (zip bombs). */
const MAX_DOCX_INFLATED = 64 * 1024 * 1024;
const MAX_DOCX_ENTRIES = 5000;
/** Largest file read for text (more is cut: the text is capped at maxChars anyway). */
const MAX_TEXT_READ = 4 * 1024 * 1024;
/** Images over this many bytes are re-encoded even when small enough in pixels (Anthropic: 5 MB base64). */
const MAX_IMAGE_PASSTHROUGH = 3_500_000;
/**
 * What is read of a JPEG to decide how it is sent: its header (size, orientation) comes before
 * its first scan, within the first few KiB of a photo (tens with an EXIF thumbnail). A header
 * not within them is read whole.
 */
const JPEG_HEAD_BYTES = 64 * 1024;
const PASSTHROUGH_TYPES = new Set(["image/jpeg", "image/png", "image/webp", "image/gif"]);

/** A small LRU by a weight (characters or bytes). */
class Lru<V> {
  readonly #map = new Map<string, { v: V; w: number }>();
  #total = 0;
  constructor(private readonly maxWeight: number) {}
  get(k: string): V | undefined {
    const e = this.#map.get(k);
    if (!e) return undefined;
    this.#map.delete(k);
    this.#map.set(k, e);
    return e.v;
  }
  has(k: string): boolean {
    return this.#map.has(k);
  }
  set(k: string, v: V, w: number): void {
    const old = this.#map.get(k);
    if (old) {
      this.#total -= old.w;
      this.#map.delete(k);
    }
    if (w > this.maxWeight) return;
    this.#map.set(k, { v, w });
    this.#total += w;
    for (const [key, e] of this.#map) {
      if (this.#total <= this.maxWeight) break;
      this.#map.delete(key);
      this.#total -= e.w;
    }
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Whether the stored type (or, for generic zips, the name) is a document we extract. */
export function isExtractable(mimeType: string, name?: string): boolean {
  if (mimeType === PDF || mimeType === DOCX || isTextType(mimeType)) return true;
  return mimeType === "application/zip" && extensionOf(name) === "docx";
}

/**
 * Extracted document texts by mediaId, shared by the process: the prompt (built synchronously)
 * reads them after the runtime warmed them for the window (`MediaUnderstanding.warm`).
 */
const documentTexts = new Lru<Outcome<{ text: string; chars: number; truncated: boolean }>>(8_000_000);

/** The extracted text of a document already in the cache, or undefined. */
export function cachedDocumentText(mediaId: string): string | undefined {
  const r = documentTexts.get(`x:${mediaId}`);
  return r?.ok ? r.value.text : undefined;
}

export class MediaUnderstanding {
  readonly #texts = documentTexts;
  readonly #transcripts = new Lru<Outcome<string>>(2_000_000);
  /** What each picture is sent as (tiny entries: the decision and its size, no bytes). */
  readonly #images = new Lru<Outcome<PictureDecision>>(1_000_000);
  /** Resized pictures' bytes, by mediaId and maxSide. */
  readonly #resized = new Lru<Buffer>(48 * 1024 * 1024);
  readonly #inflight = new Map<string, Promise<unknown>>();

  constructor(private readonly deps: UnderstandingDeps) {}

  get config(): MediaConfig {
    return this.deps.media;
  }

  /**
   * Once per key at a time, cached when done: until `fresh` says otherwise, a thrown failure for
   * RETRY_FAILED_MS.
   */
  async #once<T>(
    cache: Lru<Outcome<T>>,
    key: string,
    weight: (v: Outcome<T>) => number,
    run: () => Promise<Outcome<T>>,
    fresh: (v: Outcome<T>) => boolean = () => true,
  ): Promise<Outcome<T>> {
    const hit = cache.get(key);
    if (hit && fresh(hit) && Date.now() < (failedUntil.get(hit) ?? Number.POSITIVE_INFINITY)) return hit;
    const running = this.#inflight.get(key) as Promise<Outcome<T>> | undefined;
    if (running) return running;
    const p = run()
      .catch((err: unknown): Outcome<T> => {
        const failed = { ok: false as const, reason: errorMessage(err) };
        failedUntil.set(failed, Date.now() + RETRY_FAILED_MS);
        return failed;
      })
      .then((r) => {
        cache.set(key, r, weight(r));
        return r;
      })
      .finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, p);
    return p;
  }

  /** The transcript of a stored audio file, or why not. */
  transcribe(part: { mediaId: string; mimeType: string; name?: string }): Promise<Outcome<string>> {
    return this.#once(
      this.#transcripts,
      `t:${part.mediaId}`,
      (r) => (r.ok ? r.value.length : 100),
      () => this.#transcribe(part),
    );
  }

  async #transcribe(part: { mediaId: string; mimeType: string; name?: string }): Promise<Outcome<string>> {
    const cfg = this.deps.media.understanding.audio;
    const provider = this.deps.providers[cfg.provider];
    if (provider?.kind !== "openai")
      return {
        ok: false,
        reason: `media.understanding.audio.provider "${cfg.provider}" is not a configured openai-compatible provider`,
      };
    const file = await this.deps.store.read(part.mediaId, this.deps.media.maxBytes.audio);
    if (!file) return { ok: false, reason: "the file is no longer stored" };
    const buf = file.data;
    const form = new FormData();
    const ext =
      extensionOf(part.name) ||
      (part.mimeType.includes("ogg") || part.mimeType.includes("opus")
        ? "ogg"
        : (part.mimeType.split("/")[1] ?? "bin"));
    form.append("file", new Blob([buf], { type: part.mimeType }), `audio.${ext}`);
    form.append("model", cfg.model);
    form.append("response_format", "json");
    if (cfg.language) form.append("language", cfg.language);
    const base = (provider.baseUrl ?? "https://api.openai.com/v1").replace(/\/+$/, "");
    const res = await fetch(`${base}/audio/transcriptions`, {
      method: "POST",
      body: form,
      headers: {
        ...(provider.headers ?? {}),
        ...(provider.apiKey ? { authorization: `Bearer ${provider.apiKey}` } : {}),
      },
      signal: AbortSignal.timeout(this.deps.transcribeTimeoutMs ?? 120_000),
    });
    if (!res.ok) return { ok: false, reason: `the transcription service answered HTTP ${res.status}` };
    const body = (await res.json().catch(() => null)) as { text?: unknown } | null;
    if (typeof body?.text !== "string")
      return { ok: false, reason: "the transcription service sent no text" };
    return { ok: true, value: body.text.trim() };
  }

  /** A document's text capped at `maxChars` (the cut said), or why not. */
  extract(part: {
    mediaId: string;
    mimeType: string;
    name?: string;
  }): Promise<Outcome<{ text: string; chars: number; truncated: boolean }>> {
    return this.#once(
      this.#texts,
      `x:${part.mediaId}`,
      (r) => (r.ok ? r.value.text.length : 100),
      () => withTimeout(this.#extract(part), this.deps.extractTimeoutMs ?? 20_000, "extraction"),
    );
  }

  async #extract(part: {
    mediaId: string;
    mimeType: string;
    name?: string;
  }): Promise<Outcome<{ text: string; chars: number; truncated: boolean }>> {
    const maxChars = this.deps.media.understanding.documents.maxChars;
    const asText = isTextType(part.mimeType);
    const file = await this.deps.store.read(
      part.mediaId,
      asText ? Math.min(MAX_TEXT_READ, maxChars * 4 + 4) : this.deps.media.maxBytes.file,
    );
    if (!file) return { ok: false, reason: "the file is no longer stored" };
    let raw: string;
    if (asText) raw = file.data.toString("utf8");
    else {
      const { data: buf, cut } = file;
      if (cut) return { ok: false, reason: "the file is larger than media.maxBytes.file" };
      if (part.mimeType === PDF) raw = await pdfText(buf);
      else if (part.mimeType === DOCX || part.mimeType === "application/zip") raw = await docxText(buf);
      else return { ok: false, reason: `no text can be read from ${part.mimeType}` };
    }
    const text = raw.replace(/\r\n?/g, "\n").trim();
    const chars = text.length;
    if (chars <= maxChars) return { ok: true, value: { text, chars, truncated: false } };
    return {
      ok: true,
      value: {
        text: `${text.slice(0, maxChars)}\n[… cut at ${maxChars} of ${chars} characters]`,
        chars,
        truncated: true,
      },
    };
  }

  /**
   * An image for a vision model, the longer side ≤ maxSide, or why not: its type and its content
   * (size and a read of the bytes). A picture sent as it is stored is read from the store by each
   * request; a resized one is kept in a bounded cache. What this caches per picture is the
   * decision, not the picture: nothing here grows with sessions. A decision is made again once
   * its file is past `media.store.retention` (it is then no longer stored: a note, not a failed
   * call) or its resized bytes left the cache, so `open()` finds what it sends in hand.
   */
  image(part: { mediaId: string; mimeType: string }): Promise<Outcome<PictureDecision>> {
    const maxSide = this.deps.media.understanding.image.maxSide;
    return this.#once(
      this.#images,
      `i:${part.mediaId}:${maxSide}`,
      () => 100,
      () => withTimeout(this.#image(part, maxSide), this.deps.extractTimeoutMs ?? 20_000, "image resize"),
      (r) =>
        !r.ok || (Date.now() < r.value.expiresAt && (!r.value.resized || this.#resized.has(r.value.resized))),
    );
  }

  async #image(
    part: { mediaId: string; mimeType: string },
    maxSide: number,
  ): Promise<Outcome<PictureDecision>> {
    const { store } = this.deps;
    const maxBytes = this.deps.media.maxBytes.image;
    // A photo sent as it is stored is decided from its head and then read by each request as it
    // is written: no picture-sized buffer in the gateway (a 2 MB read per photo turn was half
    // of what started a full GC about every other photo turn).
    const jpeg = part.mimeType === "image/jpeg";
    const head = await store.read(part.mediaId, jpeg ? Math.min(JPEG_HEAD_BYTES, maxBytes) : maxBytes);
    if (!head) return { ok: false, reason: "the file is no longer stored" };
    const { size, expiresAt } = head;
    if (size > maxBytes) return { ok: false, reason: "the image is larger than media.maxBytes.image" };
    const sharp = await loadSharp();
    const found = await pictureMeta(sharp, head, () => store.read(part.mediaId, maxBytes));
    if (!found) return { ok: false, reason: "the file is no longer stored" };
    const { meta } = found;
    // the whole file, when it was read to decide (a local no closure below captures)
    let data = found.data;
    const w = meta?.autoOrient?.width ?? meta?.width ?? 0;
    const h = meta?.autoOrient?.height ?? meta?.height ?? 0;
    if (!meta || !w || !h) return { ok: false, reason: "the image could not be decoded" };
    const oriented = !meta.orientation || meta.orientation === 1;
    const gone = () =>
      new SwitchboardError("NOT_FOUND", `the picture ${part.mediaId} is no longer stored`, {
        details: { mediaId: part.mediaId },
      });
    if (
      Math.max(w, h) <= maxSide &&
      size <= MAX_IMAGE_PASSTHROUGH &&
      PASSTHROUGH_TYPES.has(part.mimeType) &&
      oriented &&
      !(meta.pages && meta.pages > 1)
    ) {
      // Bytes read whole are the first request's while they are still in memory, not kept for
      // it; otherwise each request reads the file as it writes it (into its own scratch buffer).
      const justRead = data && new WeakRef(data);
      return {
        ok: true,
        value: {
          mimeType: part.mimeType,
          bytes: size,
          expiresAt,
          open: async (scratch) => {
            const data = justRead?.deref();
            if (data) return [data];
            const stream = scratch
              ? await store.openInto(part.mediaId, scratch)
              : await store.open(part.mediaId);
            if (!stream) throw gone();
            return stream;
          },
        },
      };
    }
    data ??= (await store.read(part.mediaId, maxBytes))?.data;
    if (!data) return { ok: false, reason: "the file is no longer stored" };
    const out = await shrink(sharp, data, maxSide);
    const resized = `r:${part.mediaId}:${maxSide}`;
    this.#resized.set(resized, out, out.length);
    const bytes = out.length;
    return {
      ok: true,
      value: {
        mimeType: "image/jpeg",
        bytes,
        expiresAt,
        resized,
        // image() made sure the bytes were in the cache right before the call
        open: async () => {
          const data = this.#resized.get(resized);
          if (!data || data.length !== bytes) throw gone();
          return [data];
        },
      },
    };
  }

  /** Extracts (or finds cached) the text of every document part in `contents` (user lines). */
  async warm(contents: readonly unknown[]): Promise<void> {
    if (this.deps.media.understanding.documents.mode !== "extract") return;
    for (const c of contents) {
      if (!Array.isArray(c)) continue;
      for (const p of c as Array<Partial<MediaPart>>)
        if (
          p?.type === "file" &&
          typeof p.mediaId === "string" &&
          p.extracted &&
          typeof p.mimeType === "string"
        )
          await this.extract({
            mediaId: p.mediaId,
            mimeType: p.mimeType,
            ...(p.name ? { name: p.name } : {}),
          });
    }
  }

  /**
   * A turn's inbound parts, understood before its user line is written: audio gets its
   * `transcript`, documents their `extracted` counts; a failure adds a `media_note` after the
   * part with its reason (the file part itself is kept: the agent may send it on).
   */
  async enrich(parts: readonly MediaPart[]): Promise<{ parts: MediaPart[]; transcripts: string[] }> {
    const u = this.deps.media.understanding;
    const out: MediaPart[] = [];
    const transcripts: string[] = [];
    for (const p of parts) {
      if (p.type === "audio" && u.audio.mode === "transcribe" && p.transcript === undefined) {
        const r = await this.transcribe(p);
        if (r.ok) {
          out.push({ ...p, transcript: r.value });
          transcripts.push(r.value);
        } else {
          this.deps.logger.warn({ mediaId: p.mediaId, reason: r.reason }, "media: transcription failed");
          out.push(p, noteFor(p, "transcription_failed"));
        }
        continue;
      }
      if (
        p.type === "file" &&
        u.documents.mode === "extract" &&
        isExtractable(p.mimeType, p.name) &&
        !p.extracted
      ) {
        const r = await this.extract(p);
        if (r.ok) out.push({ ...p, extracted: { chars: r.value.chars, truncated: r.value.truncated } });
        else {
          this.deps.logger.warn({ mediaId: p.mediaId, reason: r.reason }, "media: extraction failed");
          out.push(p, noteFor(p, "extraction_failed"));
        }
        continue;
      }
      out.push(p);
    }
    return { parts: out, transcripts };
  }
}

type Sharp = typeof import("sharp").default;
let sharpModule: Promise<Sharp> | undefined;

/**
 * sharp, imported on the first picture (a gateway that never sees one, or sees only video and
 * files, never loads libvips), set for a gateway: one libvips thread per image (the pictures
 * are small and the machine's cores run turns) and no libvips operation cache (each picture is
 * read once; the result is cached here by mediaId), which otherwise keeps up to 50 MB.
 */
function loadSharp(): Promise<Sharp> {
  sharpModule ??= import("sharp").then(({ default: sharp }) => {
    sharp.concurrency(1);
    sharp.cache(false);
    return sharp;
  });
  return sharpModule;
}

/**
 * A picture's metadata from what was read of it: its head when that was all of it or holds the
 * header (a JPEG), else the whole file read now (`data`), or null when it is no longer stored.
 * limitInputPixels bounds a decompression bomb; sequentialRead: the decoder reads top to bottom
 * once (what a shrink needs), not at random.
 */
async function pictureMeta(
  sharp: Sharp,
  head: { data: Buffer; cut: boolean },
  readWhole: () => Promise<{ data: Buffer } | null>,
): Promise<{ meta: Metadata | null; data?: Buffer } | null> {
  const opts = { limitInputPixels: PIXEL_LIMIT, sequentialRead: true };
  // a file sharp cannot read is an answer about the file (a note), not a failure to retry
  const metaOf = (data: Buffer) =>
    sharp(data, opts)
      .metadata()
      .catch(() => null);
  if (!head.cut) return { meta: await metaOf(head.data), data: head.data };
  const meta = await metaOf(head.data);
  if (meta?.width && meta.height) return { meta };
  const whole = await readWhole();
  return whole && { meta: await metaOf(whole.data), data: whole.data };
}

/** Decoded pixels allowed in one picture (a decompression bomb is refused before it is decoded). */
const PIXEL_LIMIT = 100_000_000;

/**
 * `buf` turned upright and shrunk so its longer side is ≤ maxSide, as a JPEG. fastShrinkOnLoad
 * (the default, said here): a JPEG is decoded at 1/2, 1/4 or 1/8 of its size when that is still
 * at least maxSide, so a 12 MP photo is never decoded whole.
 */
function shrink(sharp: Sharp, buf: Buffer, maxSide: number): Promise<Buffer> {
  return sharp(buf, { limitInputPixels: PIXEL_LIMIT, sequentialRead: true })
    .rotate()
    .resize({
      width: maxSide,
      height: maxSide,
      fit: "inside",
      withoutEnlargement: true,
      fastShrinkOnLoad: true,
    })
    .jpeg({ quality: 85, mozjpeg: false })
    .toBuffer();
}

function noteFor(
  p: Extract<MediaPart, { mediaId: string }>,
  reason: "transcription_failed" | "extraction_failed",
): MediaPart {
  return {
    type: "media_note",
    reason,
    mimeType: p.mimeType,
    bytes: p.bytes,
    ...(p.name ? { name: p.name } : {}),
  };
}

async function pdfText(buf: Buffer): Promise<string> {
  const { extractText, getDocumentProxy } = await import("unpdf");
  const doc = await getDocumentProxy(new Uint8Array(buf));
  try {
    const { text } = await extractText(doc, { mergePages: true });
    return text;
  } finally {
    await doc.destroy().catch(() => undefined);
  }
}

/** DOCX text via mammoth, after the zip's declared inflated sizes are checked (zip bombs). */
async function docxText(buf: Buffer): Promise<string> {
  const { default: JSZip } = await import("jszip");
  const zip = await JSZip.loadAsync(buf);
  let inflated = 0;
  let entries = 0;
  for (const f of Object.values(zip.files)) {
    entries++;
    const size = (f as unknown as { _data?: { uncompressedSize?: number } })._data?.uncompressedSize ?? 0;
    inflated += size;
    if (entries > MAX_DOCX_ENTRIES || inflated > MAX_DOCX_INFLATED)
      throw new Error(`the document inflates past ${MAX_DOCX_INFLATED} bytes (a zip bomb?)`);
  }
  if (!zip.file("word/document.xml")) throw new Error("not a Word document (no word/document.xml)");
  const { default: mammoth } = await import("mammoth");
  const { value } = await mammoth.extractRawText({ buffer: buf });
  return value;
}
