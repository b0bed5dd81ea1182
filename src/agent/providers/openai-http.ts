import type { IncomingMessage } from "node:http";
import type { Writable } from "node:stream";
import { createParser } from "eventsource-parser";
import type { ChatCompletion, ChatCompletionChunk } from "openai/resources/chat/completions";
import type { PictureContent } from "../../media/types.js";
import type { ModelRequest, ToolSpec } from "../../services/models.js";
import { BadAnswerError, bodyExcerpt, type Failure, statusFromType } from "./failure.js";
import { sendRequest } from "./node-fetch.js";
import { openAIMessagesParts, type Piece, pieceLength } from "./openai-map.js";
import { base64Of, withScratch } from "./picture-base64.js";
import type { Abortable } from "./retry.js";

/**
 * The Chat Completions call itself, over node:http(s) keep-alive sockets: one request, the body
 * written as one string, the SSE answer parsed off the socket as it arrives (eventsource-parser).
 * The SDK's request pipeline (body encoder, header merging, request logging, a WHATWG Response
 * and web streams around every answer) cost 0.75 ms of CPU per call on this machine against
 * 0.27 ms for the same call made here (bench/gateway.ts and issue 18); the SDK stays for its
 * types and for `ping` (models.list). Failures are described as `Failure` values (failure.ts),
 * the same ones the SDK's errors map to, so retry and error messages do not change.
 */

/** A non-2xx answer, or an `error` object inside a stream (status 500 then, as the SDK reads it). */
export class ChatHttpError extends Error {
  constructor(readonly failure: Extract<Failure, { kind: "status" }>) {
    super(failure.message);
    this.name = "ChatHttpError";
  }
}

/** Error bodies are read up to this size (a proxy's HTML page must not fill memory). */
const ERROR_BODY_LIMIT = 64 * 1024;

const toolsJson = new WeakMap<readonly ToolSpec[], Buffer>();

/**
 * The tool list as Chat Completions JSON, encoded. The registry hands out the same (frozen) spec
 * array for the same agent, policy and depth, so its ~8 KB of JSON is serialised and encoded
 * once, not per call.
 */
function toolsBytes(tools: readonly ToolSpec[]): Buffer {
  let bytes = toolsJson.get(tools);
  if (bytes === undefined) {
    bytes = Buffer.from(
      JSON.stringify(
        tools.map((t) => ({
          type: "function",
          function: { name: t.name, description: t.description, parameters: t.parameters },
        })),
      ),
    );
    toolsJson.set(tools, bytes);
  }
  return bytes;
}

/**
 * The request body (only standard fields, so Ollama, vLLM, llama.cpp and LM Studio accept it),
 * in the pieces it is written in: the socket gets them in one writev as they are, so the
 * messages' JSON is never copied into one string with the rest (nor with the request head, which
 * node:http prepends to a first piece that is a string: that piece is kept short), the messages
 * a session's last request sent go out as the JSON made then (`openAIMessagesParts`), the tool
 * list goes out as the bytes made once, and pictures are their content, read and encoded as the
 * request is written (`writeBody`).
 */
export function chatBodyParts(req: ModelRequest, stream: boolean): Array<string | Piece> {
  const parts: Array<string | Piece> = [
    `{"model":${JSON.stringify(req.model)},"messages":`,
    ...openAIMessagesParts(req),
  ];
  let rest = "";
  // An empty `tools` array is rejected by some servers: leave the field out instead.
  if (req.tools.length > 0) parts.push(',"tools":', toolsBytes(req.tools));
  if (req.maxOutputTokens !== undefined) rest += `,"max_tokens":${JSON.stringify(req.maxOutputTokens)}`;
  // Servers without stream_options support simply send no usage chunk; usage is then zero.
  if (stream) rest += `,"stream":true,"stream_options":{"include_usage":true}`;
  parts.push(`${rest}}`);
  return parts;
}

/**
 * One write handed to the request, resolved once it is done (the buffer may then be reused), or
 * rejected when the request closes first: a destroyed request (aborted, or its socket gone) never
 * calls back a write it had queued, which left the body's writer, and the picture's open stream,
 * waiting for good.
 */
function written(out: Writable, piece: Buffer): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const closed = () => reject(new Error("the request closed while its body was being written"));
    if (out.destroyed || out.writableEnded) return closed();
    out.once("close", closed);
    out.write(piece, (err) => {
      out.off("close", closed);
      if (err) reject(err);
      else resolve();
    });
  });
}

/**
 * Writes the body's pieces in order, each picture streamed from where it is kept (read into a
 * pooled scratch buffer where its store can) and written as its base64: gathered 64 KiB at a time
 * into a second pooled buffer, each handed to the socket (its write done) before more is read or
 * encoded into the same buffers. No picture-sized buffer is made or kept: a 2 MB photo read whole
 * and encoded whole was ~5 MB of buffers living through the call, enough to start a full GC about
 * every photo turn.
 */
export function writeBody(out: Writable, parts: ReadonlyArray<string | Piece>): Promise<void> {
  return withScratch(async (scratch, buf) => {
    for (const p of parts)
      if (typeof p === "string" || Buffer.isBuffer(p)) out.write(p);
      else await writePicture(out, p, scratch, buf);
  });
}

/**
 * One picture as its base64: read into `scratch` where its store can, its strings gathered into
 * `buf` and each full buffer written (its write done) before more is encoded into it.
 */
async function writePicture(out: Writable, p: PictureContent, scratch: Buffer, buf: Buffer): Promise<void> {
  let used = 0;
  for await (const s of base64Of(p, scratch)) {
    if (used + s.length > buf.length) {
      await written(out, buf.subarray(0, used));
      used = 0;
    }
    used += buf.write(s, used, "latin1");
  }
  if (used > 0) await written(out, buf.subarray(0, used));
}

function headerGetter(res: IncomingMessage): { get(name: string): string | null } {
  return {
    get(name: string) {
      const v = res.headers[name.toLowerCase()];
      return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
    },
  };
}

/** The body's error `code`, else its `type` (`insufficient_quota`, `rate_limit_exceeded`). */
function errorCode(error: unknown): string | undefined {
  if (!error || typeof error !== "object") return undefined;
  const { code, type } = error as { code?: unknown; type?: unknown };
  return typeof code === "string" && code ? code : typeof type === "string" && type ? type : undefined;
}

/** The server's reason, read the way the SDK's APIError does (`error.message`, else the body), and its code. */
function statusMessage(status: number, text: string): { message: string; code?: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { message: text ? `${status} ${text}` : `${status} status code (no body)` };
  }
  const error = (parsed as { error?: unknown } | null)?.error;
  const code = errorCode(error);
  if (error && typeof error === "object" && typeof (error as { message?: unknown }).message === "string") {
    return { message: (error as { message: string }).message, ...(code ? { code } : {}) };
  }
  return { message: `${status} ${JSON.stringify(error ?? parsed)}`, ...(code ? { code } : {}) };
}

/**
 * A 200 whose body is not a completion (a proxy's HTML page, JSON of another shape): a bad
 * answer from the server side (502), never a TypeError deep in the mapping.
 */
function parseCompletion(text: string, contentType: string | undefined): ChatCompletion {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BadAnswerError({
      kind: "status",
      status: 502,
      message: `answered 200 with a body that is not JSON (${contentType ?? "no content-type"}): ${bodyExcerpt(text)}`,
    });
  }
  const choices = (parsed as { choices?: unknown } | null)?.choices;
  if (!Array.isArray(choices)) {
    throw new BadAnswerError({
      kind: "status",
      status: 502,
      message: `answered 200 with JSON that is not a chat completion: ${bodyExcerpt(text)}`,
    });
  }
  return parsed as ChatCompletion;
}

function readAll(res: IncomingMessage, limit: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let text = "";
    res.setEncoding("utf8");
    res.on("data", (d: string) => {
      if (text.length < limit) text += d;
    });
    res.once("end", () => resolve(text));
    res.once("error", reject);
  });
}

/**
 * The data of each `text/event-stream` event, parsed by eventsource-parser (fields per line, an
 * empty line ends an event, `data` lines join with "\n", CR, LF and CRLF all end a line; comments,
 * `event`, `id` and `retry` carry nothing a completion needs). `end()` closes the body: an event
 * without its closing blank line still counts, as a last chunk cut off by a proxy did before.
 */
export function sseData(onData: (data: string) => void): { feed(text: string): void; end(): void } {
  const parser = createParser({ onEvent: (event) => onData(event.data) });
  return { feed: (text) => parser.feed(text), end: () => parser.feed("\n\n") };
}

export interface ChatCall {
  url: URL;
  headers: Record<string, string>;
  req: ModelRequest;
  signal: Abortable;
}

/**
 * Sends one call. Without `onChunk` the answer is one JSON completion; with it the call streams
 * and every chunk is handed over as it is parsed. Rejects with `ChatHttpError` for a non-2xx
 * answer, the socket's error for a connection that failed or broke, the signal's reason on abort.
 */
export async function postChat(
  call: ChatCall,
  onChunk?: (chunk: ChatCompletionChunk) => void,
): Promise<ChatCompletion | undefined> {
  const parts = chatBodyParts(call.req, onChunk !== undefined);
  let bytes = 0;
  let pictures = false;
  for (const p of parts) {
    bytes += typeof p === "string" ? Buffer.byteLength(p) : pieceLength(p);
    pictures ||= typeof p !== "string" && !Buffer.isBuffer(p);
  }
  // without pictures, the pieces go in one writev as they are
  const body = pictures ? (req: Writable) => writeBody(req, parts) : (parts as Array<string | Buffer>);
  const res = await sendRequest(
    call.url,
    {
      method: "POST",
      headers: { ...call.headers, "content-length": String(bytes) },
      signal: call.signal,
    },
    body,
  );
  const status = res.statusCode ?? 502;
  if (status < 200 || status >= 300) {
    const text = await readAll(res, ERROR_BODY_LIMIT);
    throw new ChatHttpError({
      kind: "status",
      status,
      ...statusMessage(status, text),
      headers: headerGetter(res),
    });
  }
  const contentType = res.headers["content-type"];
  if (!onChunk) return parseCompletion(await readAll(res, Number.POSITIVE_INFINITY), contentType);
  if (contentType !== undefined && !/event-stream|json/i.test(contentType)) {
    // a proxy's page instead of a stream: not a reply to wait on
    throw new BadAnswerError({
      kind: "status",
      status: 502,
      message: `answered 200 with ${contentType} instead of an event stream: ${bodyExcerpt(await readAll(res, ERROR_BODY_LIMIT))}`,
    });
  }
  await new Promise<void>((resolve, reject) => {
    let done = false;
    let failed = false;
    const onAbort = () => fail(call.signal.reason);
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      call.signal.removeEventListener("abort", onAbort);
      res.destroy();
      reject(err);
    };
    const onData = (data: string) => {
      if (done || failed) return;
      if (data.startsWith("[DONE]")) {
        done = true;
        return;
      }
      let chunk: ChatCompletionChunk & { error?: unknown };
      try {
        chunk = JSON.parse(data) as ChatCompletionChunk & { error?: unknown };
      } catch {
        fail(
          new ChatHttpError({
            kind: "status",
            status: 502,
            message: `could not parse a stream event: ${data.slice(0, 200)}`,
          }),
        );
        return;
      }
      if (chunk && typeof chunk === "object" && chunk.error) {
        // an `error` event mid-answer: the server failed while answering
        const e = chunk.error as { message?: unknown };
        const message = typeof e.message === "string" ? e.message : JSON.stringify(chunk.error);
        const code = errorCode(chunk.error);
        fail(
          new ChatHttpError({
            kind: "status",
            status: statusFromType(code),
            message,
            ...(code ? { code } : {}),
          }),
        );
        return;
      }
      try {
        onChunk(chunk);
      } catch (err) {
        fail(err);
      }
    };
    res.setEncoding("utf8");
    const parser = sseData(onData);
    res.on("data", (text: string) => parser.feed(text));
    res.once("end", () => {
      parser.end();
      call.signal.removeEventListener("abort", onAbort);
      if (!failed) resolve();
    });
    res.once("error", fail);
    call.signal.addEventListener("abort", onAbort, { once: true });
  });
  return undefined;
}
