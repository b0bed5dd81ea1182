/**
 * A loopback OpenAI-compatible server for tests: `POST /v1/chat/completions` (JSON and SSE
 * streaming) and `GET /v1/models`. Replies come from a queue (`enqueue`), else from a default
 * handler that echoes the last user message. Every request is recorded for assertions.
 *
 *   const fake = await startOpenAIFake();
 *   fake.enqueue({ toolCalls: [{ name: "sessions_list", arguments: {} }] }, { text: "done" });
 *   // provider config: { kind: "openai", baseUrl: fake.url }
 *   await fake.close();
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { loopbackServer } from "./http.js";

export interface FakeToolCall {
  /** Default `call_<n>` (unique per server). */
  id?: string;
  name: string;
  /** JSON text, or an object that is serialised. Default `{}`. */
  arguments?: string | Record<string, unknown>;
}

export interface FakeChatReply {
  text?: string;
  toolCalls?: FakeToolCall[];
  /** Reported usage. Default: about chars/4 of the request and reply. `null` sends no usage at all. */
  usage?: { prompt: number; completion: number; cached?: number } | null;
  /** Default "tool_calls" when there are tool calls, else "stop". */
  finishReason?: string;
  model?: string;
  /** Wait before answering; ends early (nothing is sent) if the client goes away. */
  delayMs?: number;
  /** Wait for this before answering (a gate the test opens). */
  until?: Promise<unknown>;
  /** Streaming only: wait between SSE chunks. */
  chunkDelayMs?: number;
  /** Streaming only: send this many SSE events, then hold the connection open without ending it. */
  stallAfterEvents?: number;
  /** Streaming only: send this many SSE events, then destroy the connection (dropped mid-reply). */
  dropAfterEvents?: number;
  /** Answer with this HTTP status and an OpenAI-style error body instead of a completion. */
  status?: number;
  /** Error message for `status`. */
  error?: string;
  /** Extra response headers (e.g. `retry-after`). */
  headers?: Record<string, string>;
  /** Destroy the connection without answering: a network failure. */
  drop?: boolean;
  // Fault injection (failover tests):
  /** Answer exactly this (status default 200): an HTML page, JSON of the wrong shape, garbage. */
  raw?: { status?: number; contentType?: string; body: string };
  /** Streaming only: end the response cleanly after this many SSE events, without finish or [DONE]. */
  truncateAfterEvents?: number;
  /** Streaming only: after this many SSE events send an `error` object in the stream and end. */
  errorEvent?: { afterEvents: number; message?: string; type?: string; code?: string };
  /** The error body's `code` for `status` (e.g. `insufficient_quota` on a 429). */
  errorCode?: string;
}

export interface ChatRequestMessage {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

export interface ChatRequestBody {
  model?: string;
  messages?: ChatRequestMessage[];
  tools?: Array<{ type: string; function: { name: string; description?: string; parameters?: unknown } }>;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  max_tokens?: number;
  [field: string]: unknown;
}

export interface RecordedRequest {
  method: string;
  /** Path without the query, e.g. `/v1/chat/completions`. */
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body (`{}` for a GET). */
  body: ChatRequestBody;
  /** Reply the server chose; undefined for non-chat requests. */
  reply?: FakeChatReply;
}

export type FakeChatHandler = (req: RecordedRequest) => FakeChatReply;

export interface OpenAIFakeOptions {
  /** When set, requests without `Authorization: Bearer <apiKey>` get a 401. */
  apiKey?: string;
  /** Model ids listed by `GET /v1/models`. Default `["fake-model"]`. */
  models?: string[];
}

export interface OpenAIFake {
  /** Base URL including `/v1`: use it as `baseUrl` in provider config. */
  url: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Only the chat completion requests. */
  chatRequests(): RecordedRequest[];
  /** `/audio/transcriptions` and `/audio/speech` requests (the transcription's body: model, language, file). */
  audioRequests(): RecordedRequest[];
  /** What `/audio/transcriptions` answers: a text, or a status and text per request. Default: a fixed line. */
  setTranscription(answer: string | ((req: RecordedRequest) => { status: number; text: string })): void;
  /** Queue replies (or per-request handlers) for the next chat requests, in order. */
  enqueue(...replies: Array<FakeChatReply | FakeChatHandler>): void;
  /** Handler used when the queue is empty (default: echo the last user message). */
  setDefault(handler: FakeChatHandler): void;
  /** Resolves once at least `n` requests have arrived in total. */
  waitForRequests(n: number): Promise<void>;
  close(): Promise<void>;
}

/** Text of a message's content, whether a string or an array of `{type:"text", text}` parts. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => (p && typeof p === "object" && "text" in p && typeof p.text === "string" ? p.text : ""))
      .join("");
  }
  return "";
}

/** The default reply: the last user message verbatim, or `tool result: …` after a tool message. */
export const echoHandler: FakeChatHandler = (req) => {
  const messages = req.body.messages ?? [];
  const last = messages[messages.length - 1];
  if (last?.role === "tool") return { text: `tool result: ${contentText(last.content)}` };
  const lastUser = [...messages].reverse().find((m) => m.role === "user");
  return { text: contentText(lastUser?.content) };
};

const approxTokens = (s: string) => Math.ceil(s.length / 4);

/**
 * An Ogg/Opus-looking body (not real audio): the "OggS" capture pattern, the first page's
 * "OpusHead" where a sniffer looks for it (byte 28), then `tail`.
 */
export function oggOpus(tail: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from("OggS\0\x02", "latin1"),
    Buffer.alloc(22),
    Buffer.from("OpusHead", "latin1"),
    tail,
  ]);
}

export async function startOpenAIFake(options: OpenAIFakeOptions = {}): Promise<OpenAIFake> {
  const requests: RecordedRequest[] = [];
  let transcriptFor: (req: RecordedRequest) => { status: number; text: string } = () => ({
    status: 200,
    text: "hello from the voice note",
  });
  const queue: Array<FakeChatReply | FakeChatHandler> = [];
  let fallback: FakeChatHandler = echoHandler;
  let waiters: Array<{ n: number; resolve: () => void }> = [];
  const timers = new Set<NodeJS.Timeout>();
  let callSeq = 0;
  let completionSeq = 0;

  const wait = (ms: number, res: ServerResponse) =>
    new Promise<boolean>((resolve) => {
      if (ms <= 0) return resolve(!res.destroyed);
      const t = setTimeout(() => {
        timers.delete(t);
        res.off("close", onClose);
        resolve(!res.destroyed);
      }, ms);
      const onClose = () => {
        clearTimeout(t);
        timers.delete(t);
        resolve(false);
      };
      timers.add(t);
      res.once("close", onClose);
    });

  function notify() {
    const ready = waiters.filter((w) => requests.length >= w.n);
    waiters = waiters.filter((w) => requests.length < w.n);
    for (const w of ready) w.resolve();
  }

  function sendJson(
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  }

  async function chat(rec: RecordedRequest, res: ServerResponse) {
    const next = queue.shift() ?? fallback;
    const reply = typeof next === "function" ? next(rec) : next;
    rec.reply = reply;
    if (reply.until) await reply.until;
    if (reply.delayMs && !(await wait(reply.delayMs, res))) return;
    if (reply.drop) {
      res.socket?.destroy();
      return;
    }
    if (reply.raw) {
      res.writeHead(reply.raw.status ?? 200, { "content-type": reply.raw.contentType ?? "text/html" });
      res.end(reply.raw.body);
      return;
    }
    if (reply.status && reply.status >= 400) {
      const type =
        reply.status === 429
          ? "rate_limit_exceeded"
          : reply.status >= 500
            ? "server_error"
            : "invalid_request_error";
      sendJson(
        res,
        reply.status,
        {
          error: {
            message: reply.error ?? `fake error ${reply.status}`,
            type,
            code: reply.errorCode ?? null,
          },
        },
        reply.headers,
      );
      return;
    }
    const model = reply.model ?? rec.body.model ?? "fake-model";
    const text = reply.text ?? "";
    const calls = (reply.toolCalls ?? []).map((c) => ({
      id: c.id ?? `call_${++callSeq}`,
      name: c.name,
      arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}),
    }));
    const finish = reply.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop");
    const usage =
      reply.usage === null
        ? undefined
        : (() => {
            const u = reply.usage ?? {
              prompt: approxTokens(JSON.stringify(rec.body.messages ?? [])),
              completion: approxTokens(text + calls.map((c) => c.arguments).join("")),
            };
            return {
              prompt_tokens: u.prompt,
              completion_tokens: u.completion,
              total_tokens: u.prompt + u.completion,
              ...(u.cached !== undefined ? { prompt_tokens_details: { cached_tokens: u.cached } } : {}),
            };
          })();
    const id = `chatcmpl-fake-${++completionSeq}`;
    const created = Math.floor(Date.now() / 1000);

    if (!rec.body.stream) {
      sendJson(
        res,
        200,
        {
          id,
          object: "chat.completion",
          created,
          model,
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: calls.length > 0 && text === "" ? null : text,
                ...(calls.length > 0
                  ? {
                      tool_calls: calls.map((c) => ({
                        id: c.id,
                        type: "function",
                        function: { name: c.name, arguments: c.arguments },
                      })),
                    }
                  : {}),
              },
              finish_reason: finish,
            },
          ],
          ...(usage ? { usage } : {}),
        },
        reply.headers,
      );
      return;
    }

    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      ...reply.headers,
    });
    const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finishReason }],
    });
    const events: unknown[] = [chunk({ role: "assistant", content: "" })];
    // Word-sized pieces, so tests see several deltas.
    for (const piece of text.match(/\S+\s*|\s+/g) ?? []) events.push(chunk({ content: piece }));
    for (const [index, c] of calls.entries()) {
      events.push(
        chunk({
          tool_calls: [{ index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }],
        }),
      );
      const half = Math.ceil(c.arguments.length / 2);
      for (const part of [c.arguments.slice(0, half), c.arguments.slice(half)]) {
        if (part) events.push(chunk({ tool_calls: [{ index, function: { arguments: part } }] }));
      }
    }
    events.push(chunk({}, finish));
    if (usage && rec.body.stream_options?.include_usage) {
      events.push({ id, object: "chat.completion.chunk", created, model, choices: [], usage });
    }
    for (const [i, e] of events.entries()) {
      if (reply.stallAfterEvents !== undefined && i >= reply.stallAfterEvents) return;
      if (reply.dropAfterEvents !== undefined && i >= reply.dropAfterEvents) {
        res.socket?.destroy();
        return;
      }
      if (reply.truncateAfterEvents !== undefined && i >= reply.truncateAfterEvents) {
        res.end();
        return;
      }
      if (reply.errorEvent && i >= reply.errorEvent.afterEvents) {
        const { message = "fake stream error", type = "server_error", code } = reply.errorEvent;
        res.end(`data: ${JSON.stringify({ error: { message, type, code: code ?? null } })}\n\n`);
        return;
      }
      if (i > 0 && reply.chunkDelayMs && !(await wait(reply.chunkDelayMs, res))) return;
      if (res.destroyed) return;
      // Before a deliberate drop, each event is flushed so the client really saw it.
      if (reply.dropAfterEvents !== undefined)
        await new Promise<void>((r) => res.write(`data: ${JSON.stringify(e)}\n\n`, () => r()));
      else res.write(`data: ${JSON.stringify(e)}\n\n`);
    }
    res.end("data: [DONE]\n\n");
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path0 = (req.url ?? "/").split("?")[0] ?? "/";
    if (req.method === "POST" && path0 === "/v1/audio/transcriptions") return transcription(req, res, chunks);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: ChatRequestBody = {};
    if (raw) {
      try {
        body = JSON.parse(raw) as ChatRequestBody;
      } catch {
        sendJson(res, 400, { error: { message: "body is not JSON", type: "invalid_request_error" } });
        return;
      }
    }
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const rec: RecordedRequest = { method: req.method ?? "GET", path, headers: req.headers, body };
    requests.push(rec);
    notify();
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      sendJson(res, 401, { error: { message: "Incorrect API key provided", type: "invalid_request_error" } });
      return;
    }
    if (rec.method === "POST" && path === "/v1/chat/completions") return chat(rec, res);
    if (rec.method === "POST" && path === "/v1/audio/speech") {
      const audio = oggOpus(Buffer.from(String(body.input ?? "")));
      res.writeHead(200, { "content-type": "audio/ogg", "content-length": String(audio.length) });
      res.end(audio);
      return;
    }
    if (rec.method === "GET" && path === "/v1/models") {
      const data = (options.models ?? ["fake-model"]).map((m) => ({
        id: m,
        object: "model",
        created: 0,
        owned_by: "fake",
      }));
      return sendJson(res, 200, { object: "list", data });
    }
    sendJson(res, 404, {
      error: { message: `no route ${rec.method} ${path}`, type: "invalid_request_error" },
    });
  }

  /** `POST /v1/audio/transcriptions`: multipart `file`, `model`, `language?` (parsed by undici's FormData). */
  async function transcription(req: IncomingMessage, res: ServerResponse, chunks: Buffer[]) {
    const form = await new Request("http://fake/", {
      method: "POST",
      headers: { "content-type": String(req.headers["content-type"] ?? "") },
      body: Buffer.concat(chunks),
    }).formData();
    const file = form.get("file");
    const rec: RecordedRequest = {
      method: "POST",
      path: "/v1/audio/transcriptions",
      headers: req.headers,
      body: {
        model: String(form.get("model") ?? ""),
        language: form.get("language") ?? undefined,
        response_format: form.get("response_format") ?? undefined,
        file:
          file && typeof file !== "string"
            ? { name: file.name, type: file.type, bytes: file.size, text: await file.text() }
            : undefined,
      },
    };
    requests.push(rec);
    notify();
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      sendJson(res, 401, { error: { message: "Incorrect API key provided", type: "invalid_request_error" } });
      return;
    }
    const answer = transcriptFor(rec);
    if (answer.status !== 200)
      return sendJson(res, answer.status, {
        error: { message: "transcription failed", type: "server_error" },
      });
    sendJson(res, 200, { text: answer.text });
  }

  const loop = await loopbackServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(err), type: "server_error" } });
      else res.destroy();
    });
  });
  return {
    url: `${loop.url}/v1`,
    requests,
    chatRequests: () => requests.filter((r) => r.path === "/v1/chat/completions"),
    audioRequests: () => requests.filter((r) => r.path.startsWith("/v1/audio/")),
    setTranscription: (answer) => {
      transcriptFor = typeof answer === "function" ? answer : () => ({ status: 200, text: answer });
    },
    enqueue: (...replies) => {
      queue.push(...replies);
    },
    setDefault: (handler) => {
      fallback = handler;
    },
    waitForRequests: (n) =>
      requests.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve })),
    close: async () => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await loop.close();
    },
  };
}
