import { chunkText } from "./chunk.js";

/**
 * The messages one outbound text goes out as. Delivery already chunked it under the limit, so it
 * goes out whole (never re-chunked); only a longer text (a caller that skipped delivery, or plain
 * text that escaping made longer) is split here rather than truncated.
 */
export function messagesOf(text: string, limit: number): string[] {
  return text.length > limit ? chunkText(text, limit) : [text];
}
