import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import type { CompletionUsage } from "openai/resources/completions";
import type { PictureContent } from "../../media/types.js";
import type {
  ModelImage,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ToolCall,
} from "../../services/models.js";
import type { Usage } from "../../store/types.js";

/**
 * Pure mapping between our provider contract and Chat Completions. Only standard fields are
 * sent (no vendor-only parameters), so Ollama, vLLM, llama.cpp and LM Studio accept the body.
 */

/**
 * One model message as a Chat Completions message, its pictures left out: a user message with
 * pictures is written by `openAIMessagesParts` (image_url parts whose data URLs are filled in as
 * the request is written).
 */
export function toOpenAIMessage(m: ModelMessage): ChatCompletionMessageParam {
  if (m.role === "user") return { role: "user", content: m.content };
  if (m.role === "tool") return { role: "tool", tool_call_id: m.toolCallId, content: m.content };
  if (m.toolCalls && m.toolCalls.length > 0) {
    return {
      role: "assistant",
      // Some servers reject an empty string next to tool calls; null is the documented form.
      content: m.content === "" ? null : m.content,
      tool_calls: m.toolCalls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      })),
    };
  }
  return { role: "assistant", content: m.content };
}

/**
 * The request JSON of the messages a request sent, kept by its first message for the next one:
 * each message with the content, tool calls and tool call id it was serialised with, and where
 * its JSON ends; the JSON itself is kept encoded, in a few segments.
 */
interface SentJson {
  messages: ModelMessage[];
  contents: string[];
  toolCalls: Array<readonly ToolCall[] | undefined>;
  toolCallIds: Array<string | undefined>;
  images: Array<readonly ModelImage[] | undefined>;
  /** Their Chat Completions JSON, joined with "," (no brackets), UTF-8, cut in segments. */
  segments: Piece[];
  /** Per message, the end (in bytes) of its JSON in the segments put together. */
  ends: number[];
  /** The system prompt of the last request and its opening piece (`[` and its JSON). */
  system: string;
  open: Buffer;
}

const sentJson = new WeakMap<ModelMessage, SentJson>();

/**
 * A piece of request JSON: encoded text, or a picture whose base64 goes there (read as the
 * request is written: a session's JSON holds the picture's content, never its bytes). A picture
 * is a segment of its own, never merged.
 */
export type Piece = Buffer | PictureContent;

/** A piece's length in the body, in bytes (a picture's: its base64's). */
export function pieceLength(p: Piece): number {
  return Buffer.isBuffer(p) ? p.length : Math.ceil(p.bytes / 3) * 4;
}

/** Message `i` of `sent` is `m`, with the fields it was serialised with. */
function unchanged(sent: SentJson, i: number, m: ModelMessage): boolean {
  return (
    sent.messages[i] === m &&
    sent.contents[i] === m.content &&
    sent.toolCalls[i] === (m.role === "assistant" ? m.toolCalls : undefined) &&
    sent.toolCallIds[i] === (m.role === "tool" ? m.toolCallId : undefined) &&
    sent.images[i] === (m.role === "user" ? m.images : undefined)
  );
}

/** Keeps the first `bytes` (> 0) bytes of the segments (a view, not a copy, of the one cut). */
function cutSegments(segments: Piece[], bytes: number): void {
  let start = 0;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    const length = pieceLength(seg);
    if (start + length >= bytes) {
      // the segments before ended short of `bytes`: this one keeps at least one byte (a message
      // ends after its pictures' closing quotes, so a picture is never cut)
      if (bytes - start < length) {
        if (!Buffer.isBuffer(seg)) throw new Error("request JSON cut inside a picture");
        segments[i] = seg.subarray(0, bytes - start);
      }
      segments.length = i + 1;
      return;
    }
    start += length;
  }
}

/**
 * Adds a segment, merging the newest ones while the last is at least half the one before: sizes
 * then fall geometrically, so a session's JSON stays in a handful of segments and each byte is
 * copied a logarithmic number of times over the session, not once per request.
 */
function pushSegment(segments: Piece[], seg: Buffer): void {
  segments.push(seg);
  for (let n = segments.length; n >= 2; n--) {
    const last = segments[n - 1]!;
    const before = segments[n - 2]!;
    if (!Buffer.isBuffer(last) || !Buffer.isBuffer(before) || last.length * 2 < before.length) break;
    segments.length = n - 1;
    segments[n - 2] = Buffer.concat([before, last]);
  }
}

function openingOf(system: string): Buffer {
  return Buffer.from(system ? `[${JSON.stringify({ role: "system", content: system })}` : "[");
}

/**
 * `JSON.stringify` of the request's messages (the system prompt first), as encoded pieces that
 * add up to it (the body goes out in one writev as they are: nothing is copied into one string,
 * measured or encoded again), serialising only what the session's last request did not send: the
 * prompt window hands out the same message objects turn after turn (prompt.ts keeps a session's
 * units), so a request that starts with messages the last one sent, unchanged, reuses their JSON
 * and serialises the rest. The run of reused messages ends at the first one given another object,
 * content, tool calls or tool call id (the newest unit of a window is built again once its reply
 * arrived); a window that lost its first message is serialised afresh. One entry per session (by
 * its window's first message), not one per message: a window built afresh costs one entry, not
 * one per message. The system prompt's JSON is reused while it stays the same.
 */
export function openAIMessagesParts(req: Pick<ModelRequest, "system" | "messages">): Piece[] {
  const msgs = req.messages;
  const first = msgs[0];
  if (first === undefined) return [openingOf(req.system), CLOSE];
  let sent = sentJson.get(first);
  let kept = 0;
  if (sent) {
    const most = Math.min(sent.messages.length, msgs.length);
    while (kept < most && unchanged(sent, kept, msgs[kept]!)) kept++;
  }
  if (!sent || kept === 0) {
    sent = {
      messages: [],
      contents: [],
      toolCalls: [],
      toolCallIds: [],
      images: [],
      segments: [],
      ends: [],
      system: req.system,
      open: openingOf(req.system),
    };
    sentJson.set(first, sent);
  } else {
    if (kept < sent.messages.length) {
      sent.messages.length = kept;
      sent.contents.length = kept;
      sent.toolCalls.length = kept;
      sent.toolCallIds.length = kept;
      sent.images.length = kept;
      sent.ends.length = kept;
      cutSegments(sent.segments, sent.ends[kept - 1]!);
    }
    if (sent.system !== req.system) {
      sent.system = req.system;
      sent.open = openingOf(req.system);
    }
  }
  if (kept < msgs.length) {
    // JSON text not yet encoded, and the encoded pieces (a message with pictures adds its own)
    let text: string[] = [];
    const pieces: Piece[] = [];
    let end = kept > 0 ? sent.ends[kept - 1]! : 0;
    for (let i = kept; i < msgs.length; i++) {
      const m = msgs[i]!;
      const sep = i > 0 ? "," : "";
      const withImages = m.role === "user" ? imageMessagePieces(m) : undefined;
      if (withImages) {
        if (text.length > 0) pieces.push(Buffer.from(text.join("")));
        text = [];
        if (sep) pieces.push(COMMA);
        pieces.push(...withImages);
        end += sep.length;
        for (const p of withImages) end += pieceLength(p);
      } else {
        const json = JSON.stringify(toOpenAIMessage(m));
        text.push(sep, json);
        end += sep.length + Buffer.byteLength(json);
      }
      sent.messages.push(m);
      sent.contents.push(m.content);
      sent.toolCalls.push(m.role === "assistant" ? m.toolCalls : undefined);
      sent.toolCallIds.push(m.role === "tool" ? m.toolCallId : undefined);
      sent.images.push(m.role === "user" ? m.images : undefined);
      sent.ends.push(end);
    }
    if (text.length > 0) pieces.push(Buffer.from(text.join("")));
    // the pieces between pictures as one segment each, the pictures as they are
    let run: Buffer[] = [];
    const flush = () => {
      if (run.length > 0) pushSegment(sent.segments, run.length === 1 ? run[0]! : Buffer.concat(run));
      run = [];
    };
    for (const piece of pieces) {
      if (Buffer.isBuffer(piece)) run.push(piece);
      else {
        flush();
        sent.segments.push(piece);
      }
    }
    flush();
  }
  return req.system ? [sent.open, COMMA, ...sent.segments, CLOSE] : [sent.open, ...sent.segments, CLOSE];
}

/**
 * A user message with pictures, as Chat Completions JSON in pieces: a text part, then an
 * image_url part per picture whose data URL's base64 is the picture itself, filled in as the
 * request is written (no multi-megabyte data URL is built as a string, escaped and encoded again,
 * nor kept). Undefined when no picture has its content.
 */
function imageMessagePieces(m: Extract<ModelMessage, { role: "user" }>): Piece[] | undefined {
  const images = (m.images ?? []).filter((i) => i.content);
  if (images.length === 0) return undefined;
  const pieces: Piece[] = [
    Buffer.from(`{"role":"user","content":[${JSON.stringify({ type: "text", text: m.content })}`),
  ];
  for (const i of images) {
    const head = JSON.stringify(`data:${i.mimeType};base64,`).slice(0, -1);
    pieces.push(Buffer.from(`,{"type":"image_url","image_url":{"url":${head}`), i.content!, IMAGE_CLOSE);
  }
  pieces.push(USER_CLOSE);
  return pieces;
}

const IMAGE_CLOSE = Buffer.from('"}}');
const USER_CLOSE = Buffer.from("]}");
const CLOSE = Buffer.from("]");
const COMMA = Buffer.from(",");

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

  /** A finish reason arrived: the stream reached its end (a cut stream never sends one). */
  get finished(): boolean {
    return this.finish !== null;
  }

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
