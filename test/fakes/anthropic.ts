/**
 * A loopback Anthropic Messages API for tests: `POST /v1/messages` (JSON, or SSE with
 * `stream: true`: text in `chunkChars`-sized deltas, tool input as `input_json_delta`s) and
 * `GET /v1/models`. Replies come from a queue, else the last user text is echoed. Use `url` as
 * the provider's `baseUrl` (the SDK appends `/v1/...`).
 */
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { loopbackServer } from "./http.js";

export interface FakeAnthropicReply {
  text?: string;
  toolUses?: Array<{ id?: string; name: string; input?: Record<string, unknown> }>;
  /** Default: about chars/4 of request and reply. */
  usage?: { input: number; output: number; cacheRead?: number; cacheWrite?: number };
  /** Default "tool_use" when there are tool uses, else "end_turn". */
  stopReason?: string;
  model?: string;
  delayMs?: number;
  /** Answer with this HTTP status and an Anthropic-style error body. */
  status?: number;
  error?: string;
  headers?: Record<string, string>;
  /** Streaming only: characters per text delta (default 4). */
  chunkChars?: number;
  /** Streaming only: wait this long between events. */
  chunkDelayMs?: number;
  /** Streaming only: destroy the connection after this many text deltas (a reply cut off mid-way). */
  dropAfterChunks?: number;
  // Fault injection (failover tests):
  /** Answer exactly this (status default 200): an HTML page, JSON of the wrong shape, garbage. */
  raw?: { status?: number; contentType?: string; body: string };
  /** Streaming only: end the response cleanly after this many text deltas, without message_stop. */
  truncateAfterChunks?: number;
  /** Streaming only: after this many text deltas send an SSE `error` event of this type and end. */
  errorEvent?: { afterChunks: number; type: string; message?: string };
  /** The error body's `error.type` for `status` (default by status: rate_limit_error, api_error, …). */
  errorType?: string;
}

export interface AnthropicRequestBody {
  model?: string;
  max_tokens?: number;
  system?: unknown;
  messages?: Array<{ role: string; content: unknown }>;
  tools?: Array<{ name: string; description?: string; input_schema?: unknown }>;
  [field: string]: unknown;
}

export interface RecordedAnthropicRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: AnthropicRequestBody;
}

export type FakeAnthropicHandler = (req: RecordedAnthropicRequest) => FakeAnthropicReply;

export interface AnthropicFake {
  /** Base URL without `/v1`. */
  url: string;
  requests: RecordedAnthropicRequest[];
  enqueue(...replies: Array<FakeAnthropicReply | FakeAnthropicHandler>): void;
  setDefault(handler: FakeAnthropicHandler): void;
  /** Resolves once at least `n` requests have arrived in total. */
  waitForRequests(n: number): Promise<void>;
  close(): Promise<void>;
}

function lastUserText(body: AnthropicRequestBody): string {
  const lastUser = [...(body.messages ?? [])].reverse().find((m) => m.role === "user");
  const c = lastUser?.content;
  if (typeof c === "string") return c;
  if (!Array.isArray(c)) return "";
  const parts = c as Array<{ type?: string; text?: string; content?: unknown }>;
  const texts = parts.filter((p) => p.type === "text").map((p) => p.text ?? "");
  if (texts.length > 0) return texts.join("");
  const result = parts.find((p) => p.type === "tool_result");
  return result
    ? `tool result: ${typeof result.content === "string" ? result.content : JSON.stringify(result.content)}`
    : "";
}

export const anthropicEchoHandler: FakeAnthropicHandler = (req) => ({ text: lastUserText(req.body) });

interface StreamedMessage {
  id: string;
  model: string;
  text: string;
  toolUses: Array<{ type: string; id: string; name: string; input: Record<string, unknown> }>;
  usage: { input: number; output: number; cacheRead?: number; cacheWrite?: number };
  stopReason: string;
}

/** The Messages stream: message_start, one block per text/tool use with its deltas, message_delta, message_stop. */
async function streamMessage(
  res: ServerResponse,
  reply: FakeAnthropicReply,
  m: StreamedMessage,
): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...reply.headers });
  const pause = () =>
    reply.chunkDelayMs ? new Promise((r) => setTimeout(r, reply.chunkDelayMs)) : Promise.resolve();
  const event = async (type: string, data: Record<string, unknown>) => {
    if (res.destroyed) return;
    await new Promise<void>((r) =>
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`, () => r()),
    );
    await pause();
  };
  await event("message_start", {
    message: {
      id: m.id,
      type: "message",
      role: "assistant",
      model: m.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: m.usage.input,
        output_tokens: 1,
        cache_read_input_tokens: m.usage.cacheRead ?? 0,
        cache_creation_input_tokens: m.usage.cacheWrite ?? 0,
      },
    },
  });
  let index = 0;
  if (m.text) {
    await event("content_block_start", { index, content_block: { type: "text", text: "" } });
    const size = Math.max(1, reply.chunkChars ?? 4);
    let sent = 0;
    for (let at = 0; at < m.text.length; at += size) {
      if (reply.dropAfterChunks !== undefined && sent >= reply.dropAfterChunks) {
        res.destroy();
        return;
      }
      if (reply.truncateAfterChunks !== undefined && sent >= reply.truncateAfterChunks) {
        res.end();
        return;
      }
      if (reply.errorEvent && sent >= reply.errorEvent.afterChunks) {
        await event("error", {
          error: { type: reply.errorEvent.type, message: reply.errorEvent.message ?? "fake stream error" },
        });
        res.end();
        return;
      }
      await event("content_block_delta", {
        index,
        delta: { type: "text_delta", text: m.text.slice(at, at + size) },
      });
      sent++;
    }
    await event("content_block_stop", { index });
    index++;
  }
  for (const t of m.toolUses) {
    await event("content_block_start", {
      index,
      content_block: { type: "tool_use", id: t.id, name: t.name, input: {} },
    });
    const json = JSON.stringify(t.input);
    const half = Math.ceil(json.length / 2);
    for (const part of [json.slice(0, half), json.slice(half)]) {
      if (part)
        await event("content_block_delta", {
          index,
          delta: { type: "input_json_delta", partial_json: part },
        });
    }
    await event("content_block_stop", { index });
    index++;
  }
  await event("message_delta", {
    delta: { stop_reason: m.stopReason, stop_sequence: null },
    usage: { output_tokens: m.usage.output },
  });
  await event("message_stop", {});
  res.end();
}

export async function startAnthropicFake(): Promise<AnthropicFake> {
  const requests: RecordedAnthropicRequest[] = [];
  const queue: Array<FakeAnthropicReply | FakeAnthropicHandler> = [];
  let fallback: FakeAnthropicHandler = anthropicEchoHandler;
  const timers = new Set<NodeJS.Timeout>();
  let waiters: Array<{ n: number; resolve: () => void }> = [];
  let seq = 0;

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };

  const loop = await loopbackServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: AnthropicRequestBody = {};
    try {
      if (raw) body = JSON.parse(raw) as AnthropicRequestBody;
    } catch {
      return send(res, 400, {
        type: "error",
        error: { type: "invalid_request_error", message: "body is not JSON" },
      });
    }
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const rec: RecordedAnthropicRequest = { method: req.method ?? "GET", path, headers: req.headers, body };
    requests.push(rec);
    for (const w of waiters) if (requests.length >= w.n) w.resolve();
    waiters = waiters.filter((w) => requests.length < w.n);
    if (rec.method === "GET" && path === "/v1/models") {
      return send(res, 200, {
        data: [
          { type: "model", id: "claude-fake", display_name: "Fake", created_at: "2025-01-01T00:00:00Z" },
        ],
        has_more: false,
        first_id: "claude-fake",
        last_id: "claude-fake",
      });
    }
    if (rec.method !== "POST" || path !== "/v1/messages") {
      return send(res, 404, {
        type: "error",
        error: { type: "not_found_error", message: `no route ${path}` },
      });
    }
    const next = queue.shift() ?? fallback;
    const reply = typeof next === "function" ? next(rec) : next;
    if (reply.delayMs) {
      const ok = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => {
          timers.delete(t);
          resolve(!res.destroyed);
        }, reply.delayMs);
        timers.add(t);
        res.once("close", () => {
          clearTimeout(t);
          timers.delete(t);
          resolve(false);
        });
      });
      if (!ok) return;
    }
    if (reply.raw) {
      res.writeHead(reply.raw.status ?? 200, { "content-type": reply.raw.contentType ?? "text/html" });
      res.end(reply.raw.body);
      return;
    }
    if (reply.status && reply.status >= 400) {
      const type =
        reply.errorType ??
        (reply.status === 402 ? "billing_error" : reply.status === 529 ? "overloaded_error" : undefined) ??
        (reply.status === 429
          ? "rate_limit_error"
          : reply.status >= 500
            ? "api_error"
            : "invalid_request_error");
      return send(
        res,
        reply.status,
        { type: "error", error: { type, message: reply.error ?? `fake error ${reply.status}` } },
        reply.headers,
      );
    }
    const text = reply.text ?? "";
    const toolUses = (reply.toolUses ?? []).map((t) => ({
      type: "tool_use",
      id: t.id ?? `toolu_fake_${++seq}`,
      name: t.name,
      input: t.input ?? {},
    }));
    const content = [...(text ? [{ type: "text", text }] : []), ...toolUses];
    const u = reply.usage ?? {
      input: Math.ceil(JSON.stringify(body.messages ?? []).length / 4),
      output: Math.ceil((text + JSON.stringify(toolUses.map((t) => t.input))).length / 4),
    };
    if (body.stream) {
      await streamMessage(res, reply, {
        id: `msg_fake_${++seq}`,
        model: reply.model ?? body.model ?? "claude-fake",
        text,
        toolUses,
        usage: u,
        stopReason: reply.stopReason ?? (toolUses.length > 0 ? "tool_use" : "end_turn"),
      });
      return;
    }
    send(
      res,
      200,
      {
        id: `msg_fake_${++seq}`,
        type: "message",
        role: "assistant",
        model: reply.model ?? body.model ?? "claude-fake",
        content,
        stop_reason: reply.stopReason ?? (toolUses.length > 0 ? "tool_use" : "end_turn"),
        stop_sequence: null,
        usage: {
          input_tokens: u.input,
          output_tokens: u.output,
          cache_read_input_tokens: u.cacheRead ?? 0,
          cache_creation_input_tokens: u.cacheWrite ?? 0,
        },
      },
      reply.headers,
    );
  });
  return {
    url: loop.url,
    requests,
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
      await loop.close();
    },
  };
}
