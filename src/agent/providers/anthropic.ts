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
  Tool,
} from "@anthropic-ai/sdk/resources/messages";
import type { ProviderConfig } from "../../config/schema.js";
import { SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { Usage } from "../../store/types.js";
import {
  connectionReason,
  type Failure,
  type FailureContext,
  failureSummary,
  failureToError,
  redact,
  retryDecisionFor,
  safeUrl,
  sdkLogger,
} from "./failure.js";
import { nodeFetch } from "./node-fetch.js";
import {
  AttemptTimeoutError,
  type CallTuning,
  DEFAULT_RETRY_POLICY,
  type RetryPolicy,
  withRetry,
  withTimeout,
} from "./retry.js";
import type { ModelMessage, ModelProvider, ModelRequest, ModelResponse, ToolCall } from "./types.js";

/**
 * Anthropic Messages API (non-streaming). Deliberately outside: extended thinking (its signed
 * thinking blocks would have to round-trip through the transcript, which ModelMessage does not
 * carry), so `thinking` is ignored here.
 */

export type AnthropicProviderConfig = Extract<ProviderConfig, { kind: "anthropic" }>;

const DEFAULT_BASE_URL = "https://api.anthropic.com";
export const DEFAULT_MAX_TOKENS = 4096;

// ---------------------------------------------------------------------------------------------
// Mapping

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
export function toAnthropicMessages(messages: ModelMessage[]): MessageParam[] {
  const out: MessageParam[] = [];
  const pushUserBlocks = (blocks: ContentBlockParam[]) => {
    const last = out[out.length - 1];
    if (last?.role === "user" && Array.isArray(last.content)) last.content.push(...blocks);
    else out.push({ role: "user", content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") pushUserBlocks([{ type: "text", text: nonEmpty(m.content) }]);
    else if (m.role === "tool") {
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

export function toAnthropicRequest(req: ModelRequest, maxTokens: number): MessageCreateParamsNonStreaming {
  const body: MessageCreateParamsNonStreaming = {
    model: req.model,
    max_tokens: req.maxOutputTokens ?? maxTokens,
    messages: toAnthropicMessages(req.messages),
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

export function fromAnthropicMessage(m: Message, requestedModel: string): ModelResponse {
  let text = "";
  const toolCalls: ToolCall[] = [];
  for (const block of m.content ?? []) {
    if (block.type === "text") text += block.text;
    else if (block.type === "tool_use") {
      toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    }
  }
  const stop = m.stop_reason;
  const stopReason: ModelResponse["stopReason"] =
    toolCalls.length > 0 || stop === "tool_use"
      ? "tool_calls"
      : stop === "end_turn" || stop === "stop_sequence"
        ? "stop"
        : stop === "max_tokens"
          ? "length"
          : "other";
  return { text, toolCalls, usage: mapAnthropicUsage(m.usage), stopReason, model: m.model || requestedModel };
}

// ---------------------------------------------------------------------------------------------
// Errors and the provider

export function describeAnthropicError(err: unknown): Failure | undefined {
  if (err instanceof AttemptTimeoutError) return { kind: "timeout", timeoutMs: err.timeoutMs };
  if (err instanceof APIConnectionTimeoutError) return { kind: "timeout" };
  if (err instanceof APIUserAbortError) return undefined;
  if (err instanceof APIConnectionError) return { kind: "connection", message: connectionReason(err) };
  if (err instanceof APIError) {
    const body = err.error as { error?: { message?: unknown }; message?: unknown } | undefined;
    const inner = body?.error?.message ?? body?.message;
    return {
      kind: "status",
      status: err.status ?? 500,
      message: typeof inner === "string" ? inner : err.message,
      headers: err.headers,
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

  function toError(err: unknown, ctx: FailureContext): unknown {
    if (err instanceof SwitchboardError) return err;
    const failure = describeAnthropicError(err);
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
      const body = toAnthropicRequest(req, maxTokens);
      try {
        const res = await withRetry(
          () =>
            withTimeout(cfg.timeoutMs, req.signal, async (signal) =>
              fromAnthropicMessage(await client.messages.create(body, { signal }), req.model),
            ),
          {
            policy,
            signal: req.signal,
            ...(tuning.sleep ? { sleep: tuning.sleep } : {}),
            ...(tuning.random ? { random: tuning.random } : {}),
            classify: (err) => retryDecisionFor(describeAnthropicError(err)),
            onRetry: ({ retry, delayMs, err }) =>
              log.warn(
                { retry, delayMs, model: req.model, err: failureSummary(describeAnthropicError(err)) },
                "model call failed; retrying",
              ),
          },
        );
        // Not streamed: the whole text is one delta, so delta consumers still see the answer.
        if (res.text && req.onTextDelta) req.onTextDelta(res.text);
        return res;
      } catch (err) {
        if (req.signal?.aborted) throw req.signal.reason;
        throw toError(err, ctx);
      }
    },
    async ping() {
      const ctx: FailureContext = { providerId: id, baseUrl, secrets };
      try {
        const page = await withTimeout(cfg.timeoutMs, undefined, (signal) =>
          client.models.list({ limit: 1 }, { signal }),
        );
        return { ok: true, message: `reachable at ${safeUrl(baseUrl)}: ${page.data.length} model(s) listed` };
      } catch (err) {
        const e = toError(err, ctx);
        return { ok: false, message: e instanceof Error ? e.message : String(e) };
      }
    },
  };
}
