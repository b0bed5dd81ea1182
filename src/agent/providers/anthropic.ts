import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from "@anthropic-ai/sdk";
import type {
  ContentBlockParam,
  Message,
  MessageCreateParamsNonStreaming,
  MessageParam,
  RawMessageStreamEvent,
  Tool,
} from "@anthropic-ai/sdk/resources/messages";
import type { ProviderConfig } from "../../config/schema.js";
import { SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { PictureContent } from "../../media/types.js";
import type {
  ModelMessage,
  ModelProvider,
  ModelRequest,
  ModelResponse,
  ToolCall,
} from "../../services/models.js";
import type { Usage } from "../../store/types.js";
import {
  BadAnswerError,
  bodyExcerpt,
  connectionReason,
  describeStreamBreak,
  type Failure,
  type FailureContext,
  failureSummary,
  failureToError,
  midReply,
  redact,
  retryDecisionFor,
  safeUrl,
  sdkLogger,
  statusFromType,
} from "./failure.js";
import { nodeFetch } from "./node-fetch.js";
import { base64Of, withScratch } from "./picture-base64.js";
import {
  AttemptTimeoutError,
  type CallTuning,
  DEFAULT_RETRY_POLICY,
  type RetryPolicy,
  withRetry,
  withTimeout,
} from "./retry.js";

/**
 * Anthropic Messages API; streamed (raw Messages stream events) when the caller wants text
 * deltas. Deliberately outside: extended thinking (its signed
 * thinking blocks would have to round-trip through the transcript, which ModelMessage does not
 * carry), so `thinking` is ignored here.
 */

export type AnthropicProviderConfig = Extract<ProviderConfig, { kind: "anthropic" }>;

const DEFAULT_BASE_URL = "https://api.anthropic.com";
export const DEFAULT_MAX_TOKENS = 4096;

// ---------------------------------------------------------------------------------------------
// Mapping

const ANTHROPIC_IMAGE_TYPES = new Set(["image/jpeg", "image/png", "image/gif", "image/webp"]);

/** Anthropic rejects empty text blocks; an empty turn still has to be sent to keep the order. */
const nonEmpty = (s: string) => (s.trim() === "" ? "(empty)" : s);

function parseInput(args: string): unknown {
  try {
    const v: unknown = JSON.parse(args);
    return v && typeof v === "object" && !Array.isArray(v) ? v : { value: v };
  } catch {
    // The model produced invalid JSON earlier; send it back as text so the turn stays valid.
    return { _raw: args };
  }
}

/**
 * Our flat message list to Anthropic turns: tool results become `tool_result` blocks in a user
 * turn, and consecutive user-side messages merge into one turn (results first, as the API asks).
 */
export function toAnthropicMessages(
  messages: ModelMessage[],
  pictures: ReadonlyMap<PictureContent, string> = new Map(),
): MessageParam[] {
  const out: MessageParam[] = [];
  const pushUserBlocks = (blocks: ContentBlockParam[]) => {
    const last = out[out.length - 1];
    if (last?.role === "user" && Array.isArray(last.content)) last.content.push(...blocks);
    else out.push({ role: "user", content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") {
      const blocks: ContentBlockParam[] = [{ type: "text", text: nonEmpty(m.content) }];
      // Pictures as base64 image blocks (API.md §8.1), resized before they got here.
      for (const img of m.images ?? []) {
        const data = img.content && pictures.get(img.content);
        if (data && ANTHROPIC_IMAGE_TYPES.has(img.mimeType))
          blocks.push({
            type: "image",
            source: {
              type: "base64",
              media_type: img.mimeType as "image/jpeg" | "image/png" | "image/gif" | "image/webp",
              data,
            },
          });
      }
      pushUserBlocks(blocks);
    } else if (m.role === "tool") {
      pushUserBlocks([{ type: "tool_result", tool_use_id: m.toolCallId, content: nonEmpty(m.content) }]);
    } else {
      const blocks: ContentBlockParam[] = [];
      if (m.content.trim() !== "") blocks.push({ type: "text", text: m.content });
      for (const c of m.toolCalls ?? []) {
        blocks.push({ type: "tool_use", id: c.id, name: c.name, input: parseInput(c.arguments) });
      }
      if (blocks.length === 0) blocks.push({ type: "text", text: nonEmpty(m.content) });
      out.push({ role: "assistant", content: blocks });
    }
  }
  return out;
}

/**
 * Each picture of the request read, as base64 (the SDK takes a block's data as a string): read
 * into one scratch buffer where its store can and encoded piece by piece, then joined, so no
 * picture-sized buffer is made besides the string.
 */
export async function picturesBase64(
  messages: readonly ModelMessage[],
  signal?: AbortSignal,
): Promise<Map<PictureContent, string>> {
  const out = new Map<PictureContent, string>();
  // a call without pictures (most) takes no scratch buffer
  if (!messages.some((m) => m.role === "user" && m.images?.some((img) => img.content))) return out;
  await withScratch(async (scratch) => {
    for (const m of messages)
      if (m.role === "user")
        for (const { content } of m.images ?? [])
          if (content && !out.has(content)) {
            const pieces: string[] = [];
            for await (const piece of base64Of(content, scratch)) {
              signal?.throwIfAborted();
              pieces.push(piece);
            }
            out.set(content, pieces.join(""));
          }
  });
  return out;
}

export function toAnthropicRequest(
  req: ModelRequest,
  maxTokens: number,
  pictures?: ReadonlyMap<PictureContent, string>,
): MessageCreateParamsNonStreaming {
  const body: MessageCreateParamsNonStreaming = {
    model: req.model,
    max_tokens: req.maxOutputTokens ?? maxTokens,
    messages: toAnthropicMessages(req.messages, pictures),
  };
  if (req.system) body.system = req.system;
  if (req.tools.length > 0) {
    body.tools = req.tools.map(
      (t): Tool => ({
        name: t.name,
        description: t.description,
        input_schema: { ...t.parameters, type: "object" },
      }),
    );
  }
  return body;
}

export function mapAnthropicUsage(u: Message["usage"] | undefined): Usage {
  if (!u) return { input: 0, output: 0 };
  const usage: Usage = { input: u.input_tokens ?? 0, output: u.output_tokens ?? 0 };
  if (u.cache_read_input_tokens) usage.cacheRead = u.cache_read_input_tokens;
  if (u.cache_creation_input_tokens) usage.cacheWrite = u.cache_creation_input_tokens;
  return usage;
}

/** Anthropic's stop_reason as ours; any tool call makes it "tool_calls". One rule for stream and message. */
function stopReasonOf(stop: string | null | undefined, hasToolCalls: boolean): ModelResponse["stopReason"] {
  if (hasToolCalls || stop === "tool_use") return "tool_calls";
  if (stop === "end_turn" || stop === "stop_sequence") return "stop";
  return stop === "max_tokens" ? "length" : "other";
}

export function fromAnthropicMessage(m: Message, requestedModel: string): ModelResponse {
  // A 200 that is not a message (a proxy's HTML page comes back from the SDK as a string).
  if (!m || typeof m !== "object" || !Array.isArray((m as { content?: unknown }).content)) {
    throw new BadAnswerError({
      kind: "status",
      status: 502,
      message: `answered 200 with a body that is not a message: ${bodyExcerpt(typeof m === "string" ? m : (JSON.stringify(m) ?? ""))}`,
    });
  }
  let text = "";
  const toolCalls: ToolCall[] = [];
  for (const block of m.content ?? []) {
    if (block.type === "text") text += block.text;
    else if (block.type === "tool_use") {
      toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    }
  }
  const stopReason = stopReasonOf(m.stop_reason, toolCalls.length > 0);
  return { text, toolCalls, usage: mapAnthropicUsage(m.usage), stopReason, model: m.model || requestedModel };
}

/**
 * Assembles a Messages stream: text blocks stream as deltas, tool input arrives as
 * `input_json_delta` fragments per block index. `message_delta` usage is cumulative (last wins).
 */
export class AnthropicStreamAccumulator {
  private text = "";
  private readonly tools = new Map<number, { id: string; name: string; json: string }>();
  private usage: Usage = { input: 0, output: 0 };
  private stop: string | null = null;
  private model = "";
  private stopped = false;

  /** `message_stop` arrived: the stream reached its end (a cut stream never sends it). */
  get finished(): boolean {
    return this.stopped || this.stop !== null;
  }

  /** Feeds one event; returns the text delta it carried (empty when none). */
  push(ev: RawMessageStreamEvent): string {
    switch (ev.type) {
      case "message_stop":
        this.stopped = true;
        return "";
      case "message_start":
        this.model = ev.message.model;
        this.usage = mapAnthropicUsage(ev.message.usage);
        return "";
      case "content_block_start":
        if (ev.content_block.type === "tool_use")
          this.tools.set(ev.index, { id: ev.content_block.id, name: ev.content_block.name, json: "" });
        return "";
      case "content_block_delta":
        if (ev.delta.type === "text_delta") {
          this.text += ev.delta.text;
          return ev.delta.text;
        }
        if (ev.delta.type === "input_json_delta") {
          const t = this.tools.get(ev.index);
          if (t) t.json += ev.delta.partial_json;
        }
        return "";
      case "message_delta": {
        if (ev.delta.stop_reason) this.stop = ev.delta.stop_reason;
        const u = ev.usage;
        this.usage = {
          ...this.usage,
          output: u.output_tokens ?? this.usage.output,
          ...(typeof u.input_tokens === "number" ? { input: u.input_tokens } : {}),
          ...(u.cache_read_input_tokens ? { cacheRead: u.cache_read_input_tokens } : {}),
          ...(u.cache_creation_input_tokens ? { cacheWrite: u.cache_creation_input_tokens } : {}),
        };
        return "";
      }
      default:
        return "";
    }
  }

  result(requestedModel: string): ModelResponse {
    const toolCalls: ToolCall[] = [...this.tools.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, t]) => ({ id: t.id, name: t.name, arguments: t.json.trim() === "" ? "{}" : t.json }));
    const stopReason = stopReasonOf(this.stop, toolCalls.length > 0);
    return { text: this.text, toolCalls, usage: this.usage, stopReason, model: this.model || requestedModel };
  }
}

// ---------------------------------------------------------------------------------------------
// Errors and the provider

export function describeAnthropicError(err: unknown): Failure | undefined {
  if (err instanceof AttemptTimeoutError) return { kind: "timeout", timeoutMs: err.timeoutMs };
  if (err instanceof APIConnectionTimeoutError) return { kind: "timeout" };
  if (err instanceof APIUserAbortError) return undefined;
  if (err instanceof APIConnectionError) return { kind: "connection", message: connectionReason(err) };
  if (err instanceof BadAnswerError) return err.failure;
  // The SDK parsing a body or stream event that is not JSON.
  if (err instanceof SyntaxError)
    return { kind: "status", status: 502, message: `answered with a body that is not JSON (${err.message})` };
  if (err instanceof APIError) {
    const body = err.error as
      | { error?: { message?: unknown; type?: unknown }; message?: unknown; type?: unknown }
      | undefined;
    const inner = body?.error?.message ?? body?.message;
    // Mid-stream errors have no status: the event's type says what happened (overloaded_error → 529).
    const t = err.type ?? body?.error?.type ?? body?.type;
    const code = typeof t === "string" && t ? t : undefined;
    return {
      kind: "status",
      status: err.status ?? statusFromType(code),
      message: typeof inner === "string" ? inner : err.message,
      headers: err.headers,
      ...(code ? { code } : {}),
    };
  }
  return undefined;
}

export function createAnthropicProvider(
  id: string,
  cfg: AnthropicProviderConfig,
  logger: Logger,
  tuning: CallTuning = {},
): ModelProvider {
  if (!cfg.apiKey) {
    throw new SwitchboardError(
      "CONFIG",
      `config: models.providers.${id}.apiKey: required for kind "anthropic" (e.g. "\${ANTHROPIC_API_KEY}")`,
      { details: { path: `models.providers.${id}.apiKey` } },
    );
  }
  const baseUrl = cfg.baseUrl ?? DEFAULT_BASE_URL;
  const log = logger.child({ provider: id, kind: "anthropic" });
  // Explicit key and base URL: the SDK never falls back to ANTHROPIC_* variables or profiles on disk.
  const client = new Anthropic({
    apiKey: cfg.apiKey,
    authToken: null,
    baseURL: baseUrl,
    maxRetries: 0,
    // Our per-attempt timer (withTimeout) is the one that fires; the SDK's is only a backstop.
    timeout: cfg.timeoutMs + 1000,
    logger: sdkLogger(log, "anthropic"),
    logLevel: "warn",
    openTelemetry: false,
    fetch: nodeFetch,
  });
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...tuning.policy, maxRetries: cfg.maxRetries };
  const secrets = [cfg.apiKey];

  function toError(err: unknown, ctx: FailureContext, emittedChars = 0): unknown {
    if (err instanceof SwitchboardError) return err;
    const failure = midReply(describeAnthropicError(err) ?? describeStreamBreak(err), emittedChars);
    if (failure) return failureToError(ctx, failure, err);
    return new SwitchboardError(
      "INTERNAL",
      `model provider "${id}" failed: ${redact(err instanceof Error ? err.message : String(err), secrets)}`,
      { details: { provider: id }, cause: err },
    );
  }

  return {
    id,
    kind: "anthropic",
    async complete(req) {
      const ctx: FailureContext = { providerId: id, model: req.model, baseUrl, secrets };
      const maxTokens = cfg.models[req.model]?.maxOutputTokens ?? DEFAULT_MAX_TOKENS;
      // Once text has reached the caller a retry would repeat it: only retry before the first delta.
      let emitted = 0;
      const attempt = async (signal: AbortSignal): Promise<ModelResponse> => {
        // the pictures are read in the attempt: under its timeout and abort, their errors mapped
        const body = toAnthropicRequest(req, maxTokens, await picturesBase64(req.messages, signal));
        if (!req.onTextDelta)
          return fromAnthropicMessage(await client.messages.create(body, { signal }), req.model);
        const stream = await client.messages.create({ ...body, stream: true }, { signal });
        const acc = new AnthropicStreamAccumulator();
        for await (const ev of stream) {
          const d = acc.push(ev);
          if (d) {
            emitted += d.length;
            req.onTextDelta(d);
          }
        }
        if (signal.aborted) throw signal.reason;
        if (!acc.finished)
          throw new BadAnswerError({
            kind: "dropped",
            message: "the stream ended before the reply was complete (no message_stop)",
            afterChars: 0,
          });
        return acc.result(req.model);
      };
      try {
        return await withRetry(
          () => withTimeout(cfg.timeoutMs, req.signal, (s) => attempt(s.toAbortSignal())),
          {
            policy: req.noRetry ? { ...policy, maxRetries: 0 } : policy,
            signal: req.signal,
            ...(tuning.sleep ? { sleep: tuning.sleep } : {}),
            ...(tuning.random ? { random: tuning.random } : {}),
            classify: (err) =>
              emitted > 0
                ? { retry: false }
                : retryDecisionFor(describeAnthropicError(err) ?? describeStreamBreak(err)),
            onRetry: ({ retry, delayMs, err }) =>
              log.warn(
                { retry, delayMs, model: req.model, err: failureSummary(describeAnthropicError(err)) },
                "model call failed; retrying",
              ),
          },
        );
      } catch (err) {
        if (req.signal?.aborted) throw req.signal.reason;
        throw toError(err, ctx, emitted);
      }
    },
    async ping() {
      const ctx: FailureContext = { providerId: id, baseUrl, secrets };
      try {
        const page = await withTimeout(cfg.timeoutMs, undefined, (signal) =>
          client.models.list({ limit: 1 }, { signal: signal.toAbortSignal() }),
        );
        return { ok: true, message: `reachable at ${safeUrl(baseUrl)}: ${page.data.length} model(s) listed` };
      } catch (err) {
        const e = toError(err, ctx);
        return { ok: false, message: e instanceof Error ? e.message : String(e) };
      }
    },
  };
}
