import type { ProviderConfig } from "../../config/schema.js";
import type { Logger } from "../../log.js";
import { abortableSleep } from "../../retry/index.js";
import type {
  ModelMessage,
  ModelProvider,
  ModelRequest,
  ModelResponse,
  ToolCall,
} from "../../services/models.js";
import {
  type CompiledRule,
  compileRules,
  DEMO_RULES,
  loadRulesFile,
  parseRules,
  renderArgs,
  renderTemplate,
  type TemplateContext,
} from "./scripted-rules.js";

/**
 * A deterministic, rule-driven model (rules: scripted-rules.ts). Used by tests and as the
 * no-key demo default. It never pretends to be a real model: in demo mode every final reply
 * carries DEMO_MARKER.
 *
 * Turn logic: the last user message picks the rule. If the conversation ends with tool results,
 * the same rule's `afterTools` (or a summary of the results) is the final text, so a tool loop always
 * ends after one round.
 */

export type ScriptedProviderConfig = Extract<ProviderConfig, { kind: "scripted" }>;

export const DEMO_MARKER =
  "(scripted demo model — configure models.default in switchboard.json5 to use a real model; see README)";

/** Protocol tokens (SEMANTICS.md) must stay exact, so the demo marker is never added to them. */
const EXACT_TOKENS = new Set(["REPLY_SKIP", "ANNOUNCE_SKIP"]);
const RESULT_PREVIEW_CHARS = 1000;

export interface ScriptedOptions {
  /** No real model is configured: mark every final reply as coming from the demo model. */
  demo?: boolean;
  /** Resolved path of `cfg.script` (index.ts resolves it against the config's directory). */
  scriptPath?: string;
}

const approxTokens = (chars: number) => Math.ceil(chars / 4);

function messageChars(m: ModelMessage): number {
  if (m.role === "assistant")
    return m.content.length + (m.toolCalls ?? []).reduce((n, c) => n + c.arguments.length, 0);
  return m.content.length;
}

function truncate(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** The tool results of the latest round: every tool message after the last assistant message. */
function latestToolResults(messages: ModelMessage[]): Array<Extract<ModelMessage, { role: "tool" }>> {
  const out: Array<Extract<ModelMessage, { role: "tool" }>> = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== "tool") break;
    out.unshift(m);
  }
  return out;
}

const TASK_RE = /\[Subagent Task\]:\s*([\s\S]+?)\s*$/;
const ANNOUNCE_RE = /^\[Sub-agent completion\] (.+)$/m;
const ENVELOPE_RE = /^\[Inter-session message\][^\n]*\n[^\n]*\n\n/;

function firstLine(s: string, max: number): string {
  const line = s.split("\n").find((l) => l.trim() !== "") ?? "";
  return truncate(line.trim(), max);
}

/**
 * What the demo says when no rule matches: a sub-agent task gets a short stand-in result, a
 * completion report is summarised in one line, and anything else is echoed without the
 * inter-session envelope the runtime wraps around routed messages.
 */
export function fallbackReply(message: string): string {
  const task = TASK_RE.exec(message)?.[1];
  if (task) {
    const t = truncate(task.replace(/\s+/g, " "), 120);
    return `Done: “${t}”. I looked into it and the short answer is ready — this is the scripted demo model, so the result is a stand-in; a real model would put its findings here.`;
  }
  if (message.startsWith("[Sub-agent completion]")) {
    const headers = [...message.matchAll(new RegExp(ANNOUNCE_RE, "gm"))].map((m) => m[1] ?? "");
    const label = headers.find((h) => !h.startsWith("from ")) ?? "a sub-agent";
    const status = /^Status: (\S+)/m.exec(message)?.[1] ?? "ok";
    const result = /^Result: ([\s\S]*?)(?:\nNotes:|$)/m.exec(message)?.[1] ?? "";
    const said = result ? firstLine(result, 200) : "(no output)";
    return status === "ok"
      ? `The sub-agent for “${truncate(label, 80)}” finished: ${said}`
      : `The sub-agent for “${truncate(label, 80)}” ended with status ${status}.`;
  }
  return `You said: ${message.replace(ENVELOPE_RE, "")}`;
}

export function createScriptedProvider(
  id: string,
  cfg: ScriptedProviderConfig,
  logger: Logger,
  opts: ScriptedOptions = {},
): ModelProvider {
  const where = `config: models.providers.${id}`;
  const rules: CompiledRule[] = [];
  if (cfg.rules) rules.push(...parseRules(cfg.rules, `${where}.rules`));
  if (cfg.script) rules.push(...loadRulesFile(opts.scriptPath ?? cfg.script, `${where}.script`));
  const builtIn = rules.length === 0;
  if (builtIn) rules.push(...compileRules(DEMO_RULES, "built-in demo rules"));
  logger
    .child({ provider: id, kind: "scripted" })
    .debug({ rules: rules.length, builtIn }, "scripted model ready");
  const demo = opts.demo ?? false;

  function answer(req: ModelRequest): { text: string; toolCalls: ToolCall[]; delayMs: number } {
    const messages = req.messages;
    const lastUser = [...messages].reverse().find((m) => m.role === "user");
    const message = lastUser?.content ?? "";
    let hit: { rule: CompiledRule["rule"]; groups: string[] } | undefined;
    for (const r of rules) {
      const groups = r.test(message);
      if (groups) {
        hit = { rule: r.rule, groups };
        break;
      }
    }
    const results = latestToolResults(messages);
    const ctx: TemplateContext = {
      groups: hit?.groups ?? [],
      message,
      lastToolResult: results[results.length - 1]?.content ?? "",
    };
    const delayMs = hit?.rule.delayMs ?? 0;
    if (results.length > 0) {
      if (hit?.rule.afterTools !== undefined)
        return { text: renderTemplate(hit.rule.afterTools, ctx), toolCalls: [], delayMs };
      const lines = results.map((r) => `${r.name}: ${truncate(r.content, RESULT_PREVIEW_CHARS)}`);
      return { text: `Tool results:\n${lines.join("\n")}`, toolCalls: [], delayMs };
    }
    if (!hit) return { text: fallbackReply(message), toolCalls: [], delayMs };
    const toolCalls = (hit.rule.toolCalls ?? []).map((c, i) => ({
      // Unique within a transcript and stable across re-runs of the same turn.
      id: `scripted_${messages.length}_${i}`,
      name: c.name,
      arguments: JSON.stringify(renderArgs(c.args, ctx)),
    }));
    return { text: renderTemplate(hit.rule.reply ?? "", ctx), toolCalls, delayMs };
  }

  return {
    id,
    kind: "scripted",
    async complete(req): Promise<ModelResponse> {
      if (req.signal?.aborted) throw req.signal.reason;
      const a = answer(req);
      if (a.delayMs > 0) await abortableSleep(a.delayMs, req.signal);
      const stopReason = a.toolCalls.length > 0 ? "tool_calls" : "stop";
      let text = a.text;
      if (demo && stopReason === "stop" && !EXACT_TOKENS.has(text.trim())) {
        text = text ? `${text}\n\n${DEMO_MARKER}` : DEMO_MARKER;
      }
      // Word-sized deltas, as a real model streams; their concatenation is `text`.
      if (text && req.onTextDelta)
        for (const piece of text.match(/\S+\s*|\s+/g) ?? []) req.onTextDelta(piece);
      const inputChars = req.system.length + req.messages.reduce((n, m) => n + messageChars(m), 0);
      const outputChars = text.length + a.toolCalls.reduce((n, c) => n + c.arguments.length, 0);
      return {
        text,
        toolCalls: a.toolCalls,
        usage: { input: approxTokens(inputChars), output: approxTokens(outputChars) },
        stopReason,
        model: req.model,
      };
    },
    async ping() {
      return {
        ok: true,
        message: `scripted model (${builtIn ? "built-in demo rules" : `${rules.length} rule(s)`}; no network)`,
      };
    },
  };
}
