import { z } from "zod";
import { type ChatSendDeps, chatSend } from "../chat-send.js";
import { method, type RpcDispatcher } from "../rpc.js";

/** `chat.send` (API.md §4): the operator writes into a session. */
export function registerChatMethods(rpc: RpcDispatcher, services: ChatSendDeps): void {
  rpc.register(
    "chat.send",
    method(
      z.strictObject({
        sessionKey: z.string().min(1),
        message: z.string().min(1).max(32_000),
        timeoutSeconds: z.number().min(0).max(3600).optional(),
        deliver: z.boolean().optional(),
      }),
      (p) => chatSend(services, p),
    ),
  );
}
