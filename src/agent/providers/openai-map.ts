import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import type { CompletionUsage } from "openai/resources/completions";
import type { Usage } from "../../store/types.js";
import type { ModelRequest, ModelResponse, ToolCall } from "./types.js";

/**
 * Pure mapping between our provider contract and Chat Completions. Only standard fields are
 * sent (no vendor-only parameters), so Ollama, vLLM, llama.cpp and LM Studio accept the body.
 */

export function toOpenAIMessages(
  req: Pick<ModelRequest, "system" | "messages">,
): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  if (req.system) out.push({ role: "system", content: req.system });
  for (const m of req.messages) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "tool") out.push({ role: "tool", tool_call_id: m.toolCallId, content: m.content });
    else if (m.toolCalls && m.toolCalls.length > 0) {
      out.push({
        role: "assistant",
        // Some servers reject an empty string next to tool calls; null is the documented form.
        content: m.content === "" ? null : m.content,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        })),
      });
    } else out.push({ role: "assistant", content: m.content });
  }
  return out;
}

/** `input` counts prompt tokens not served from cache, so pricing can charge cache reads apart. */
export function mapOpenAIUsage(u: CompletionUsage | null | undefined): Usage {
  if (!u) return { input: 0, output: 0 };
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  const written = u.prompt_tokens_details?.cache_write_tokens ?? 0;
  const usage: Usage = {
    input: Math.max(0, (u.prompt_tokens ?? 0) - cached),
    output: u.completion_tokens ?? 0,
  };
  if (cached > 0) usage.cacheRead = cached;
  if (written > 0) usage.cacheWrite = written;
  return usage;
}

export function mapFinishReason(
  reason: string | null | undefined,
  hasToolCalls: boolean,
): ModelResponse["stopReason"] {
  // Ollama and others answer "stop" even when the message carries tool calls.
  if (hasToolCalls) return "tool_calls";
  if (reason === "stop") return "stop";
  if (reason === "length") return "length";
  if (reason === "tool_calls" || reason === "function_call") return "tool_calls";
  return reason ? "other" : "stop";
}

/** Arguments as JSON text; a few servers send an object instead of the documented string. */
function argumentsText(args: unknown): string {
  if (typeof args === "string") return args;
  if (args === undefined || args === null) return "{}";
  return JSON.stringify(args);
}

export function fromOpenAICompletion(r: ChatCompletion, requestedModel: string): ModelResponse {
  const choice = r.choices[0];
  const toolCalls: ToolCall[] = [];
  for (const [i, c] of (choice?.message.tool_calls ?? []).entries()) {
    if (c.type !== "function") continue;
    toolCalls.push({
      id: c.id || `call_${i}`,
      name: c.function.name,
      arguments: argumentsText(c.function.arguments),
    });
  }
  return {
    text: choice?.message.content ?? "",
    toolCalls,
    usage: mapOpenAIUsage(r.usage),
    stopReason: mapFinishReason(choice?.finish_reason, toolCalls.length > 0),
    model: r.model || requestedModel,
  };
}

interface PartialCall {
  id: string;
  name: string;
  args: string;
}

/**
 * Assembles a streamed completion. Tool call deltas are keyed by `index`; the first fragment of
 * a call carries its id and name, later ones append to the arguments.
 */
export class ChunkAccumulator {
  private text = "";
  private readonly calls = new Map<number, PartialCall>();
  private finish: string | null = null;
  private usage: CompletionUsage | null = null;
  private model = "";

  /** Feeds one chunk; returns the text delta it carried (empty when none). */
  push(chunk: ChatCompletionChunk): string {
    if (chunk.model) this.model = chunk.model;
    if (chunk.usage) this.usage = chunk.usage;
    let delta = "";
    for (const choice of chunk.choices ?? []) {
      if (choice.index !== undefined && choice.index !== 0) continue;
      if (choice.delta?.content) delta += choice.delta.content;
      for (const tc of choice.delta?.tool_calls ?? []) {
        const index = typeof tc.index === "number" ? tc.index : this.calls.size;
        const call = this.calls.get(index) ?? { id: "", name: "", args: "" };
        if (tc.id) call.id = tc.id;
        // Most servers send the name once; a few repeat it on every fragment.
        const name = tc.function?.name;
        if (name && call.name !== name) call.name += name;
        if (tc.function?.arguments !== undefined) call.args += argumentsText(tc.function.arguments);
        this.calls.set(index, call);
      }
      if (choice.finish_reason) this.finish = choice.finish_reason;
    }
    this.text += delta;
    return delta;
  }

  result(requestedModel: string): ModelResponse {
    const toolCalls = [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([i, c]) => ({ id: c.id || `call_${i}`, name: c.name, arguments: c.args || "{}" }));
    return {
      text: this.text,
      toolCalls,
      usage: mapOpenAIUsage(this.usage),
      stopReason: mapFinishReason(this.finish, toolCalls.length > 0),
      model: this.model || requestedModel,
    };
  }
}
