import { z } from "zod";
import { type ChatSendDeps, chatSend } from "../chat-send.js";
import { method, type RpcDispatcher } from "../rpc.js";

const MAX_MESSAGE_CHARS = 32_000;

/** `chat.send`'s params (API.md §4). */
export const chatSendParams = z
  .strictObject({
    sessionKey: z.string().min(1),
    message: z.string().max(MAX_MESSAGE_CHARS),
    // any wait ≥ 0, as sessions_send (SEMANTICS §3); chatSend waits at most an hour
    timeoutSeconds: z.number().min(0).optional(),
    deliver: z.boolean().optional(),
    /** Files uploaded with `POST /media` (API.md §8.1). */
    attachments: z
      .array(
        z.strictObject({ mediaId: z.string().regex(/^sha256:[0-9a-f]{64}$/, "must be sha256:<64 hex>") }),
      )
      .max(20)
      .optional(),
  })
  .superRefine((p, ctx) => {
    if (p.message.length === 0 && !p.attachments?.length)
      ctx.addIssue({ code: "custom", message: "must not be empty (or send attachments)", path: ["message"] });
  });

const CHAT_SEND_KEYS: ReadonlySet<string> = new Set(Object.keys(chatSendParams.shape));

/** Params `chatSendParams` accepts as they are (see `RpcMethod.accepts`); the same limits. */
export function plainChatSend(p: Record<string, unknown>): boolean {
  for (const k in p) if (!CHAT_SEND_KEYS.has(k) || k === "attachments") return false;
  const { sessionKey, message, timeoutSeconds, deliver } = p;
  return (
    typeof sessionKey === "string" &&
    sessionKey.length > 0 &&
    typeof message === "string" &&
    message.length > 0 &&
    message.length <= MAX_MESSAGE_CHARS &&
    (timeoutSeconds === undefined ||
      (typeof timeoutSeconds === "number" && Number.isFinite(timeoutSeconds) && timeoutSeconds >= 0)) &&
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
