import { z } from "zod";
import { formatIssues } from "../errors.js";
import type { Services } from "../services.js";
import type { SessionTool, ToolCaller, ToolContext, ToolResult } from "../tools/types.js";
import type { ToolSpec } from "./providers/types.js";
import { explainDenied, resolveToolSet } from "./tool-policy.js";

/**
 * Which tools a caller may use, their JSON schemas, and invocation with validation. The model
 * path and `tools.invoke` both go through `invoke`, so they get exactly the same checks.
 */

export type InvokeOutcome =
  | { ok: true; result: ToolResult }
  | { ok: false; code: "FORBIDDEN" | "INVALID_PARAMS" | "NOT_FOUND"; message: string };

function policyInput(services: Services, caller: ToolCaller) {
  const cfg = services.config;
  const agent = cfg.agents.list.find((a) => a.id === caller.agentId);
  const maxSpawnDepth = agent?.subagents?.maxSpawnDepth ?? cfg.agents.defaults.subagents.maxSpawnDepth;
  return {
    profile: cfg.tools.profile,
    alsoAllow: cfg.tools.alsoAllow,
    deny: cfg.tools.deny,
    agentId: caller.agentId,
    ...(agent?.tools ? { agentOverride: agent.tools } : {}),
    ...(caller.depth > 0
      ? {
          subagent: {
            depth: caller.depth,
            maxSpawnDepth,
            allow: cfg.tools.subagents.tools.allow,
            deny: cfg.tools.subagents.tools.deny,
          },
        }
      : {}),
  };
}

export class ToolRegistry {
  readonly #tools = new Map<string, SessionTool>();

  constructor(tools: SessionTool[]) {
    for (const t of tools) this.#tools.set(t.name, t);
  }

  names(): string[] {
    return [...this.#tools.keys()];
  }

  allowedFor(services: Services, caller: ToolCaller): Set<string> {
    const set = resolveToolSet(policyInput(services, caller));
    return new Set([...set].filter((n) => this.#tools.has(n)));
  }

  specs(services: Services, caller: ToolCaller): ToolSpec[] {
    const allowed = this.allowedFor(services, caller);
    const out: ToolSpec[] = [];
    for (const name of allowed) {
      const tool = this.#tools.get(name);
      if (!tool) continue;
      const schema = tool.schema({ services, caller });
      const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
      delete json.$schema;
      out.push({ name, description: tool.description, parameters: json });
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** A tool call's raw JSON arguments as they may be stored in the caller's transcript. */
  argsForTranscript(name: string, raw: string): string {
    const tool = this.#tools.get(name);
    if (!tool?.transcriptArgs) return raw;
    try {
      return JSON.stringify(tool.transcriptArgs(JSON.parse(raw)));
    } catch {
      return JSON.stringify({ omitted: "unparseable arguments" });
    }
  }

  async invoke(name: string, rawArgs: unknown, ctx: ToolContext): Promise<InvokeOutcome> {
    const tool = this.#tools.get(name);
    if (!tool)
      return {
        ok: false,
        code: "NOT_FOUND",
        message: `unknown tool "${name}"; available: ${this.names().join(", ")}`,
      };
    const allowed = this.allowedFor(ctx.services, ctx.caller);
    if (!allowed.has(name)) {
      return {
        ok: false,
        code: "FORBIDDEN",
        message:
          explainDenied(name, policyInput(ctx.services, ctx.caller)) ??
          `tool ${name} is not allowed for this session`,
      };
    }
    const parsed = tool.schema(ctx).safeParse(rawArgs ?? {});
    if (!parsed.success) {
      return { ok: false, code: "INVALID_PARAMS", message: formatIssues(parsed.error.issues, `${name}: `) };
    }
    return { ok: true, result: await tool.execute(parsed.data, ctx) };
  }
}
