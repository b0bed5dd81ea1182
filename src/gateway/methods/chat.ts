import { z } from "zod";
import { type ChatSendDeps, chatSend } from "../chat-send.js";
import { method, type RpcDispatcher } from "../rpc.js";

/** `chat.send`'s params (API.md §4). */
export const chatSendParams = z.strictObject({
  sessionKey: z.string().min(1),
  message: z.string().min(1).max(32_000),
  timeoutSeconds: z.number().min(0).max(3600).optional(),
  deliver: z.boolean().optional(),
});

const CHAT_SEND_KEYS: ReadonlySet<string> = new Set(["sessionKey", "message", "timeoutSeconds", "deliver"]);

/** Params the `chat.send` schema accepts as they are (see `RpcMethod.accepts`). */
export function plainChatSend(p: Record<string, unknown>): boolean {
  for (const k in p) if (!CHAT_SEND_KEYS.has(k)) return false;
  const { sessionKey, message, timeoutSeconds, deliver } = p;
  return (
    typeof sessionKey === "string" &&
    sessionKey.length > 0 &&
    typeof message === "string" &&
    message.length > 0 &&
    message.length <= 32_000 &&
    (timeoutSeconds === undefined ||
      (typeof timeoutSeconds === "number" && timeoutSeconds >= 0 && timeoutSeconds <= 3600)) &&
    (deliver === undefined || typeof deliver === "boolean")
  );
}

/** `chat.send` (API.md §4): the operator writes into a session. */
export function registerChatMethods(rpc: RpcDispatcher, services: ChatSendDeps): void {
  rpc.register(
    "chat.send",
    method(chatSendParams, (p) => chatSend(services, p), plainChatSend),
  );
}
