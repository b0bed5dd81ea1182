import type OpenAI from "openai";
import type { ProviderConfig } from "../../config/schema.js";
import { SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { ModelProvider, ModelRequest, ModelResponse } from "../../services/models.js";
import {
  BadAnswerError,
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
} from "./failure.js";
import { ChatHttpError, postChat } from "./openai-http.js";
import { ChunkAccumulator, fromOpenAICompletion } from "./openai-map.js";
import {
  type Abortable,
  AttemptTimeoutError,
  type CallTuning,
  DEFAULT_RETRY_POLICY,
  type RetryPolicy,
  withRetry,
  withTimeout,
} from "./retry.js";

/**
 * Any OpenAI-compatible Chat Completions endpoint (OpenAI, Ollama, vLLM, llama.cpp, LM Studio,
 * OpenRouter). Completions go through the lean call in openai-http.ts (the SDK's request pipeline
 * cost more CPU than the rest of a turn); `ping` lists models through the official SDK
 * (openai-sdk.ts, loaded by the first ping only), whose types describe every body. Streams when
 * the caller wants text deltas; retries, timeouts and error mapping are ours (retry.ts, failure.ts).
 */

export type OpenAIProviderConfig = Extract<ProviderConfig, { kind: "openai" }>;

const DEFAULT_BASE_URL = "https://api.openai.com/v1";
/** Local servers (Ollama, llama.cpp) need no key, but the SDK refuses to start without one. */
const NO_KEY = "not-needed";

/**
 * Turns a failure of the lean call (or our attempt timeout) into a Failure; undefined for
 * anything else. `ping`'s SDK errors are described by openai-sdk.ts.
 */
export function describeOpenAIError(err: unknown): Failure | undefined {
  if (err instanceof AttemptTimeoutError) return { kind: "timeout", timeoutMs: err.timeoutMs };
  if (err instanceof ChatHttpError || err instanceof BadAnswerError) return err.failure;
  if (isSocketError(err)) return { kind: "connection", message: connectionReason(err) };
  return undefined;
}

/** A Node socket or DNS failure (`ECONNREFUSED`, `ENOTFOUND`, `ECONNRESET`, "socket hang up"). */
function isSocketError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as Error & { code?: unknown }).code;
  return (typeof code === "string" && /^E[A-Z0-9_]+$/.test(code)) || err.message === "socket hang up";
}

export function createOpenAIProvider(
  id: string,
  cfg: OpenAIProviderConfig,
  logger: Logger,
  tuning: CallTuning = {},
): ModelProvider {
  const baseUrl = cfg.baseUrl ?? DEFAULT_BASE_URL;
  const log = logger.child({ provider: id, kind: "openai" });
  /** The SDK's client and error mapping, loaded by the first ping. */
  let sdk: { client: OpenAI; describe: (err: unknown) => Failure | undefined } | undefined;
  const chatUrl = new URL(`${baseUrl.replace(/\/+$/, "")}/chat/completions`);
  const chatHeaders: Record<string, string> = {
    accept: "application/json",
    "content-type": "application/json",
    "user-agent": "switchboard",
    authorization: `Bearer ${cfg.apiKey || NO_KEY}`,
  };
  // configured headers win over ours (e.g. a gateway that wants its own authorization scheme)
  for (const [k, v] of Object.entries(cfg.headers ?? {})) chatHeaders[k.toLowerCase()] = v;
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...tuning.policy, maxRetries: cfg.maxRetries };
  const secrets = [cfg.apiKey ?? "", ...Object.values(cfg.headers ?? {})].filter((s) => s.length > 0);

  function toError(
    err: unknown,
    ctx: FailureContext,
    emittedChars = 0,
    describe: (err: unknown) => Failure | undefined = describeOpenAIError,
  ): unknown {
    if (err instanceof SwitchboardError) return err;
    const failure = midReply(describe(err) ?? describeStreamBreak(err), emittedChars);
    if (failure) return failureToError(ctx, failure, err);
    return new SwitchboardError(
      "INTERNAL",
      `model provider "${id}" failed: ${redact(err instanceof Error ? err.message : String(err), secrets)}`,
      { details: { provider: id }, cause: err },
    );
  }

  async function attempt(
    req: ModelRequest,
    signal: Abortable,
    onDelta: (d: string) => void,
  ): Promise<ModelResponse> {
    const call = { url: chatUrl, headers: chatHeaders, req, signal };
    if (!req.onTextDelta) return fromOpenAICompletion((await postChat(call))!, req.model);
    const acc = new ChunkAccumulator();
    await postChat(call, (chunk) => {
      const delta = acc.push(chunk);
      if (delta) onDelta(delta);
    });
    // A stream that ends because its signal aborted must not pass as a complete answer.
    if (signal.aborted) throw signal.reason;
    // Nor one that ended without a finish reason: the server or a proxy cut it short.
    if (!acc.finished)
      throw new BadAnswerError({
        kind: "dropped",
        message: "the stream ended before the reply was complete (no finish_reason)",
        afterChars: 0,
      });
    return acc.result(req.model);
  }

  return {
    id,
    kind: "openai",
    async complete(input) {
      // The model's configured output cap (`models.<model>.maxOutputTokens`) unless the caller sets one.
      const cap = cfg.models[input.model]?.maxOutputTokens;
      const req =
        input.maxOutputTokens === undefined && cap !== undefined ? { ...input, maxOutputTokens: cap } : input;
      const ctx: FailureContext = { providerId: id, model: req.model, baseUrl, secrets };
      // Once text has reached the caller a retry would repeat it: only retry before the first delta.
      let emitted = 0;
      const onDelta = (d: string) => {
        emitted += d.length;
        req.onTextDelta?.(d);
      };
      try {
        return await withRetry(
          () => withTimeout(cfg.timeoutMs, req.signal, (signal) => attempt(req, signal, onDelta)),
          {
            policy: req.noRetry ? { ...policy, maxRetries: 0 } : policy,
            signal: req.signal,
            ...(tuning.sleep ? { sleep: tuning.sleep } : {}),
            ...(tuning.random ? { random: tuning.random } : {}),
            classify: (err) =>
              emitted > 0
                ? { retry: false }
                : retryDecisionFor(midReply(describeOpenAIError(err) ?? describeStreamBreak(err), 0)),
            onRetry: ({ retry, delayMs, err }) =>
              log.warn(
                { retry, delayMs, model: req.model, err: failureSummary(describeOpenAIError(err)) },
                "model call failed; retrying",
              ),
          },
        );
      } catch (err) {
        // Abort is the caller's own decision: hand back its reason, as fetch does.
        if (req.signal?.aborted) throw req.signal.reason;
        throw toError(err, ctx, emitted);
      }
    },
    async ping() {
      const ctx: FailureContext = { providerId: id, baseUrl, secrets };
      try {
        if (!sdk) {
          const m = await import("./openai-sdk.js");
          const opts = {
            apiKey: cfg.apiKey || NO_KEY,
            baseUrl,
            headers: cfg.headers,
            timeoutMs: cfg.timeoutMs,
          };
          sdk = { client: m.createOpenAIClient(opts, log), describe: m.describeSdkError };
        }
        const { client } = sdk;
        const page = await withTimeout(cfg.timeoutMs, undefined, (signal) =>
          client.models.list({ signal: signal.toAbortSignal() }),
        );
        return { ok: true, message: `reachable at ${safeUrl(baseUrl)}: ${page.data.length} model(s) listed` };
      } catch (err) {
        const e = toError(err, ctx, 0, (x) => describeOpenAIError(x) ?? sdk?.describe(x));
        return { ok: false, message: e instanceof Error ? e.message : String(e) };
      }
    },
  };
}
