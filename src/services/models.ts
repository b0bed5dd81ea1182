import type { PictureContent } from "../media/types.js";
import type { Usage } from "../store/types.js";

/**
 * The model provider contract. `openai`, `anthropic` and `scripted` implement it; the runtime
 * never sees SDK types. Deliberately outside: prompt building and the tool loop (runtime).
 */

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON schema of the arguments (from zod via z.toJSONSchema). */
  parameters: Record<string, unknown>;
}

export interface ToolCall {
  id: string;
  name: string;
  /** Raw arguments as the model produced them (JSON text); validated by the runtime. */
  arguments: string;
}

export interface ModelImage {
  mediaId: string;
  mimeType: string;
  name?: string;
  /** The picture's bytes, set right before the call (a picture without them is not sent). */
  content?: PictureContent;
}

export type ModelMessage =
  /** `images`: a line's pictures (API.md §8.1); `data` (base64) is filled right before the call. */
  | { role: "user"; content: string; images?: ModelImage[] }
  | { role: "assistant"; content: string; toolCalls?: ToolCall[] }
  | { role: "tool"; toolCallId: string; name: string; content: string };

export interface ModelRequest {
  /** Model name without the provider prefix. */
  model: string;
  system: string;
  messages: ModelMessage[];
  tools: readonly ToolSpec[];
  maxOutputTokens?: number;
  thinking?: "off" | "minimal" | "low" | "medium" | "high";
  /** Aborting makes `complete()` reject with `signal.reason` (as fetch does), never a coded error. */
  signal?: AbortSignal;
  /**
   * Streaming text deltas; their concatenation equals `text`. Providers that do not stream
   * (anthropic, scripted) deliver the whole text as one delta.
   */
  onTextDelta?: (delta: string) => void;
  /**
   * One attempt, no retry of the provider's own: the failover chain (chain.ts) decides what a
   * failure leads to. Default false (`ping`, direct callers keep `models.providers.<id>.maxRetries`).
   */
  noRetry?: boolean;
}

export interface ModelResponse {
  text: string;
  toolCalls: ToolCall[];
  /** `input` excludes tokens served from cache (those are `cacheRead`); zero when the server reports none. */
  usage: Usage;
  stopReason: "stop" | "tool_calls" | "length" | "other";
  /** The model that answered (as reported by the API when it says). */
  model: string;
}

export interface ModelProvider {
  /** Provider id from config (`models.providers.<id>`). */
  readonly id: string;
  readonly kind: "openai" | "anthropic" | "scripted";
  /**
   * One model call, retried on 408/429/5xx/network failures within `maxRetries`. Failures are
   * SwitchboardErrors: UNAUTHORIZED, NOT_FOUND (model), RATE_LIMITED (RateLimitedError with
   * retryAfterMs), UNAVAILABLE, TIMEOUT, INVALID_PARAMS; never containing the API key.
   */
  complete(req: ModelRequest): Promise<ModelResponse>;
  /** Optional reachability check for `doctor`. */
  ping?(): Promise<{ ok: boolean; message: string }>;
}

// ---------------------------------------------------------------------------------------------
// The failover chain's contract (implemented in src/agent/providers/chain.ts, API.md §8.4)

/**
 * Why a model call failed, decided once from the raw answer (status, headers, the body's error
 * code) before any message is written.
 */
export const MODEL_ERROR_CLASSES = [
  "rate_limited",
  "overloaded",
  "server",
  "timeout",
  "connection",
  "empty",
  "auth",
  "billing",
  "invalid_request",
] as const;
export type ModelErrorClass = (typeof MODEL_ERROR_CLASSES)[number];

/** A model that did not answer a call, and why, in the order they were tried. */
export interface FallbackRecord {
  model: string;
  class: ModelErrorClass;
  /** Not called: its circuit was open (`class` is the failure that opened it). */
  skipped?: true;
}

export type BreakerState = "closed" | "open" | "half_open";

export interface BreakerView {
  state: BreakerState;
  /** Consecutive failed calls. */
  failures: number;
  /** While open: when the cooldown ends (ms). */
  openUntil?: number;
  lastClass?: ModelErrorClass;
}

export interface ChainHooks {
  /** Text streamed by a model that then failed is void: a streaming preview restarts from empty. */
  onReset?: () => void;
  /** A model failed (or was skipped) and the chain moves on (`run.fallback`). */
  onFallback?: (f: FallbackRecord, next: string | undefined) => void;
}

export interface ChainResult<T> {
  result: T;
  /** The ref that answered. */
  ref: string;
  fallbacks: FallbackRecord[];
}

/** What one attempt of a chain gets: the model to call. */
export interface ChainAttempt {
  target: { provider: ModelProvider; model: string; ref: string };
  /** The call is the half-open probe of its model. */
  probe: boolean;
  /** No model is left after this one. */
  last: boolean;
}
