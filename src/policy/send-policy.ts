import { normalizeKey, parseSessionKey } from "../sessions/keys.js";
import type { ChatType, SendPolicyOverride } from "../store/types.js";

/**
 * `session.sendPolicy` (SEMANTICS.md §2): may a run deliver into this session? Pure. Enforced
 * before sessions_send, chat.send, inbound auto-replies and announces; a denial surfaces as an
 * error containing SEND_BLOCKED_MESSAGE and leaves the target transcript unchanged.
 */

export const SEND_BLOCKED_MESSAGE = "send blocked by session policy";

export type SendAction = "allow" | "deny";

export interface SendPolicyRule {
  /** Every given field must match; an empty match matches every session. */
  match: { channel?: string; chatType?: ChatType | "dm"; keyPrefix?: string };
  action: SendAction;
}

export interface SendPolicyInput {
  /** The session's own `sendPolicy` override (set by `/send on|off` or sessions.patch). */
  override?: SendPolicyOverride;
  rules: readonly SendPolicyRule[];
  default: SendAction;
  /** `channel` / `chatType` fall back to what the key says when absent. */
  target: { key: string; channel?: string; chatType?: ChatType | "dm" };
}

export interface SendPolicyDecision {
  action: SendAction;
  reason: string;
}

/** direct / group / channel from the key's shape; undefined when the key does not say. */
export function chatTypeOfKey(key: string): ChatType | undefined {
  return parseSessionKey(key).chatType;
}

function normalizeChatType(t: string | undefined): ChatType | undefined {
  const v = t?.trim().toLowerCase();
  if (v === "dm" || v === "direct") return "direct";
  if (v === "group" || v === "channel") return v;
  return undefined;
}

function ruleMatches(rule: SendPolicyRule, key: string, channel?: string, chatType?: ChatType): boolean {
  const m = rule.match;
  if (m.channel !== undefined && m.channel.trim().toLowerCase() !== channel) return false;
  if (m.chatType !== undefined && normalizeChatType(m.chatType) !== chatType) return false;
  if (m.keyPrefix !== undefined && !key.startsWith(normalizeKey(m.keyPrefix))) return false;
  return true;
}

/** Override wins; else any matching deny beats any matching allow, regardless of order; else the default. */
export function evaluateSendPolicy(input: SendPolicyInput): SendPolicyDecision {
  if (input.override === "allow" || input.override === "deny") {
    return { action: input.override, reason: `session override: ${input.override}` };
  }
  const key = normalizeKey(input.target.key);
  const parsed = parseSessionKey(key);
  const channel = (input.target.channel?.trim() || parsed.channel)?.toLowerCase();
  const chatType = normalizeChatType(input.target.chatType) ?? parsed.chatType;

  let firstAllow = -1;
  for (const [i, rule] of input.rules.entries()) {
    if (!ruleMatches(rule, key, channel, chatType)) continue;
    if (rule.action === "deny")
      return { action: "deny", reason: `session.sendPolicy.rules[${i}] (deny) matched` };
    if (firstAllow === -1) firstAllow = i;
  }
  if (firstAllow !== -1) {
    return { action: "allow", reason: `session.sendPolicy.rules[${firstAllow}] (allow) matched` };
  }
  return { action: input.default, reason: `no rule matched; session.sendPolicy.default is ${input.default}` };
}
