import { readFileSync } from "node:fs";
import JSON5 from "json5";
import { z } from "zod";
import { formatIssues, SwitchboardError } from "../../errors.js";

/**
 * Rules of the scripted model: a zod-checked list, matched in order against the last user
 * message; the first match answers. Templates: `$0`…`$9` (regex match and groups),
 * `{{message}}` (the user message), `{{lastToolResult}}` (the newest tool result's text).
 *
 *   { match: "^spawn (.+)$", toolCalls: [{ name: "sessions_spawn", args: { task: "$1" } }],
 *     afterTools: "Spawned: {{lastToolResult}}" }
 */

const toolCallSchema = z.strictObject({
  name: z.string().min(1),
  /** Tool arguments; every string inside is a template. */
  args: z.record(z.string(), z.unknown()).default({}),
});

/** `then` is accepted as an alias of `afterTools` in rule files (a `then` key trips linters in TS). */
function aliasThen(raw: unknown): unknown {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw) || !("then" in raw)) return raw;
  const { then, ...rest } = raw as Record<string, unknown>;
  return "afterTools" in rest ? raw : { ...rest, afterTools: then };
}

export const scriptRuleSchema = z.preprocess(
  aliasThen,
  z
    .strictObject({
      /** A regex (case-insensitive), `{ contains }` (case-insensitive) or `{ exact }` (after trimming, case-sensitive). */
      match: z.union([
        z.string().min(1),
        z.strictObject({ contains: z.string().min(1) }),
        z.strictObject({ exact: z.string() }),
      ]),
      /** Text reply (template). With toolCalls, the text that accompanies the calls. */
      reply: z.string().optional(),
      toolCalls: z.array(toolCallSchema).optional(),
      /** Reply once the tool results are back (template); default: a summary of the results. Alias: `then`. */
      afterTools: z.string().optional(),
      /** Wait this long before answering (aborts with the request's signal). */
      delayMs: z.number().int().min(0).optional(),
    })
    .refine((r) => r.reply !== undefined || (r.toolCalls?.length ?? 0) > 0, {
      message: "a rule needs `reply` or `toolCalls`",
    }),
);

export type ScriptRule = z.output<typeof scriptRuleSchema>;

export interface CompiledRule {
  rule: ScriptRule;
  /** Match groups (`[0]` = whole match) or null. */
  test(text: string): string[] | null;
}

export function compileRules(rules: ScriptRule[], where: string): CompiledRule[] {
  return rules.map((rule, i) => {
    const m = rule.match;
    if (typeof m === "string") {
      let re: RegExp;
      try {
        re = new RegExp(m, "i");
      } catch (err) {
        throw new SwitchboardError(
          "CONFIG",
          `${where}.${i}.match: invalid regular expression: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      return { rule, test: (t) => (re.exec(t) as string[] | null)?.map((g) => g ?? "") ?? null };
    }
    if ("contains" in m) {
      const needle = m.contains.toLowerCase();
      return { rule, test: (t) => (t.toLowerCase().includes(needle) ? [m.contains] : null) };
    }
    return { rule, test: (t) => (t.trim() === m.exact ? [m.exact] : null) };
  });
}

/**
 * Validate rules from config (`rules`) or a parsed file (a rule array, or `{ rules: [...] }`);
 * errors name the path of the bad field.
 */
export function parseRules(raw: unknown, where: string): CompiledRule[] {
  const wrapped = raw !== null && typeof raw === "object" && !Array.isArray(raw) && "rules" in raw;
  const list: unknown = wrapped ? (raw as { rules: unknown }).rules : raw;
  const at = wrapped ? `${where}.rules` : where;
  if (!Array.isArray(list)) {
    throw new SwitchboardError("CONFIG", `${where}: expected an array of rules or { rules: [...] }`);
  }
  const r = z.array(scriptRuleSchema).safeParse(list);
  if (!r.success) {
    throw new SwitchboardError("CONFIG", formatIssues(r.error.issues, `${at}.`), {
      details: { issues: r.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })) },
    });
  }
  return compileRules(r.data, at);
}

export function loadRulesFile(file: string, where: string): CompiledRule[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new SwitchboardError(
      "CONFIG",
      `${where}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON5.parse(text);
  } catch (err) {
    throw new SwitchboardError("CONFIG", `${where}: ${file} is not valid JSON5: ${(err as Error).message}`);
  }
  return parseRules(raw, `${where} (${file})`);
}

export interface TemplateContext {
  groups: string[];
  message: string;
  lastToolResult: string;
}

export function renderTemplate(template: string, ctx: TemplateContext): string {
  return template
    .replace(/\{\{\s*(message|lastToolResult)\s*\}\}/g, (_m, name: string) =>
      name === "message" ? ctx.message : ctx.lastToolResult,
    )
    .replace(/\$(\d)/g, (_m, n: string) => ctx.groups[Number(n)] ?? "");
}

/** Renders every string inside tool arguments; numbers, booleans and nulls pass through. */
export function renderArgs(value: unknown, ctx: TemplateContext): unknown {
  if (typeof value === "string") return renderTemplate(value, ctx);
  if (Array.isArray(value)) return value.map((v) => renderArgs(v, ctx));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderArgs(v, ctx)]));
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Built-in demo rules: enough to try every session tool from a chat without a model key.

export const DEMO_HELP = [
  "I am the scripted demo model. Commands:",
  "- spawn <task> — start a background sub-agent (sessions_spawn)",
  "- list sessions — list visible sessions (sessions_list)",
  "- send <sessionKey> <text> — message another session (sessions_send)",
  "- history <sessionKey> — read a session's transcript (sessions_history)",
  "- status — this session's status card (session_status)",
  "- agents — agents you may spawn (agents_list)",
  "- yield — end this turn and wait for sub-agents (sessions_yield)",
  "- help — this list",
  "Anything else is echoed back.",
].join("\n");

export const DEMO_RULES: ScriptRule[] = [
  { match: "^\\s*(help|\\?)\\s*$", reply: DEMO_HELP },
  {
    match: "^\\s*spawn\\s+([\\s\\S]+?)\\s*$",
    toolCalls: [{ name: "sessions_spawn", args: { task: "$1" } }],
    afterTools: "Spawned a sub-agent for “$1”: {{lastToolResult}}",
  },
  {
    match: "^\\s*(list\\s+)?sessions\\s*$",
    toolCalls: [{ name: "sessions_list", args: {} }],
    afterTools: "Sessions: {{lastToolResult}}",
  },
  {
    match: "^\\s*send\\s+(\\S+)\\s+([\\s\\S]+?)\\s*$",
    toolCalls: [{ name: "sessions_send", args: { sessionKey: "$1", message: "$2", timeoutSeconds: 0 } }],
    afterTools: "Sent to $1: {{lastToolResult}}",
  },
  {
    match: "^\\s*history\\s+(\\S+)\\s*$",
    toolCalls: [{ name: "sessions_history", args: { sessionKey: "$1" } }],
    afterTools: "History of $1: {{lastToolResult}}",
  },
  {
    match: "^\\s*status\\s*$",
    toolCalls: [{ name: "session_status", args: {} }],
    afterTools: "Status: {{lastToolResult}}",
  },
  {
    match: "^\\s*agents\\s*$",
    toolCalls: [{ name: "agents_list", args: {} }],
    afterTools: "Agents: {{lastToolResult}}",
  },
  {
    match: "^\\s*yield\\s*$",
    toolCalls: [{ name: "sessions_yield", args: { reason: "demo: waiting for sub-agents" } }],
    afterTools: "Yielded: {{lastToolResult}}",
  },
];
