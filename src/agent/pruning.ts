import type { ContextPruningConfig } from "../config/context.js";
import { parseDurationMs } from "../config/schedule.js";
import type { Config } from "../config/schema.js";
import type { ModelMessage } from "../services/models.js";

/**
 * Session pruning (API.md §7 `contextPruning`): before a model call, old tool results are cut
 * down IN MEMORY — the transcript on disk is never touched. Only `tool` messages older than the
 * newest `keepLastAssistants` assistant messages are candidates; user and assistant text is never
 * changed; results carrying images are left alone; `tools.allow/deny` picks which tools qualify.
 * Soft trim keeps head + tail with a marker naming the original size; past `hardClearRatio` of the
 * context window the oldest candidates are replaced by the placeholder until the prompt fits.
 */

export interface PruneStats {
  softTrimmed: number;
  hardCleared: number;
  charsBefore: number;
  charsAfter: number;
}

/** Effective pruning settings of an agent: `agents.list[].contextPruning` over the defaults. */
export function pruningFor(config: Config, agentId: string): ContextPruningConfig {
  const d = config.agents.defaults.contextPruning;
  const o = config.agents.list.find((a) => a.id === agentId)?.contextPruning;
  if (!o) return d;
  return {
    mode: o.mode ?? d.mode,
    ttl: o.ttl ?? d.ttl,
    keepLastAssistants: o.keepLastAssistants ?? d.keepLastAssistants,
    softTrim: { ...d.softTrim, ...definedOnly(o.softTrim) },
    hardClear: { ...d.hardClear, ...definedOnly(o.hardClear) },
    hardClearRatio: o.hardClearRatio ?? d.hardClearRatio,
    tools: { ...d.tools, ...definedOnly(o.tools) },
  };
}

function definedOnly<T extends object>(o: T | undefined): Partial<T> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Whether this call prunes: `always`; `off` never; `cache-ttl` only when the provider's prompt
 * cache has expired, i.e. the session's last model call is older than `ttl` (or there was none).
 */
export function pruningDue(cfg: ContextPruningConfig, lastCallAt: number | undefined, now: number): boolean {
  if (cfg.mode === "off") return false;
  if (cfg.mode === "always") return true;
  if (lastCallAt === undefined) return true;
  return now - lastCallAt > (parseDurationMs(cfg.ttl) ?? 300_000);
}

function globToRegExp(glob: string): RegExp {
  const body = glob
    .trim()
    .split("*")
    .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "i");
}

/** `tools.allow/deny` with `*` wildcards, case-insensitive; deny wins; an empty allow admits all. */
export function toolPrunable(name: string, tools: { allow: string[]; deny: string[] }): boolean {
  if (tools.deny.some((g) => globToRegExp(g).test(name))) return false;
  return tools.allow.length === 0 || tools.allow.some((g) => globToRegExp(g).test(name));
}

const IMAGE_RE = /"type"\s*:\s*"(?:image|input_image|image_url)"|data:image\//;

export function hasImage(content: string): boolean {
  return IMAGE_RE.test(content);
}

export function softTrimText(text: string, headChars: number, tailChars: number): string {
  const head = text.slice(0, headChars);
  const tail = tailChars > 0 ? text.slice(text.length - tailChars) : "";
  return `${head}\n...\n[Tool result trimmed: ${text.length} chars originally; kept the first ${head.length} and the last ${tail.length}]\n...\n${tail}`;
}

function messageChars(m: ModelMessage): number {
  let n = m.content.length;
  if (m.role === "assistant" && m.toolCalls)
    for (const c of m.toolCalls) n += c.arguments.length + c.name.length;
  return n;
}

/**
 * Prunes `units` (groups of model messages, oldest first) for one call. `baseChars` is what the
 * prompt carries besides the messages (system prompt, tool schemas); `windowTokens` the model's
 * context window (chars ≈ tokens × 4). Returns new units; the input is not mutated.
 */
export function pruneUnits(
  units: ModelMessage[][],
  cfg: ContextPruningConfig,
  opts: { windowTokens: number; baseChars: number },
): { units: ModelMessage[][]; stats: PruneStats } {
  const out = units.map((u) => u.map((m) => ({ ...m })));
  const flat = out.flat();
  const charsBefore = flat.reduce((n, m) => n + messageChars(m), 0);
  // Everything from the keepLastAssistants-th newest assistant message on is protected.
  let protectedFrom = flat.length;
  if (cfg.keepLastAssistants > 0) {
    let seen = 0;
    protectedFrom = 0;
    for (let i = flat.length - 1; i >= 0; i--) {
      if (flat[i]?.role !== "assistant") continue;
      seen++;
      if (seen === cfg.keepLastAssistants) {
        protectedFrom = i;
        break;
      }
    }
    if (seen < cfg.keepLastAssistants) protectedFrom = 0;
  }
  const candidates: Array<Extract<ModelMessage, { role: "tool" }>> = [];
  for (let i = 0; i < protectedFrom; i++) {
    const m = flat[i];
    if (m?.role !== "tool") continue;
    if (!toolPrunable(m.name, cfg.tools) || hasImage(m.content)) continue;
    candidates.push(m);
  }
  let softTrimmed = 0;
  let hardCleared = 0;
  let total = charsBefore;
  const { maxChars, headChars, tailChars } = cfg.softTrim;
  for (const m of candidates) {
    if (m.content.length <= maxChars || headChars + tailChars >= m.content.length) continue;
    const trimmed = softTrimText(m.content, headChars, tailChars);
    if (trimmed.length >= m.content.length) continue;
    total -= m.content.length - trimmed.length;
    m.content = trimmed;
    softTrimmed++;
  }
  if (cfg.hardClear.enabled) {
    const limitChars = cfg.hardClearRatio * opts.windowTokens * 4;
    for (const m of candidates) {
      if (total + opts.baseChars <= limitChars) break;
      if (m.content === cfg.hardClear.placeholder) continue;
      total -= m.content.length - cfg.hardClear.placeholder.length;
      m.content = cfg.hardClear.placeholder;
      hardCleared++;
    }
  }
  return { units: out, stats: { softTrimmed, hardCleared, charsBefore, charsAfter: total } };
}
