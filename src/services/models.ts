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
  data?: string;
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
