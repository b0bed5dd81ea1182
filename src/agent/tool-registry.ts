import { z } from "zod";
import type { ToolTraits } from "../approvals/policy.js";
import { formatIssues } from "../errors.js";
import { explainDenied, resolveToolSet, toolPolicyInput, toolReport } from "../policy/tool-policy.js";
import type { Services } from "../services/index.js";
import type { ToolSpec } from "../services/models.js";
import type { SessionTool, ToolCaller, ToolContext, ToolResult } from "../tools/types.js";

/**
 * Which tools a caller may use, their JSON schemas, and invocation with validation. The model
 * path and `tools.invoke` both go through `invoke`, so they get exactly the same checks.
 */

export type InvokeOutcome =
  | { ok: true; result: ToolResult }
  | { ok: false; code: "FORBIDDEN" | "INVALID_PARAMS" | "NOT_FOUND"; message: string };

function policyInput(services: Services, caller: ToolCaller) {
  return toolPolicyInput(services.config, caller);
}

/**
 * A tool's schema depends only on the config and the caller's agent, depth and sandbox (the
 * SessionTool contract), so schemas and specs are cached per (config, agent, depth, sandbox). A
 * config change is a new config object, so the caches keyed by it are dropped with it.
 */
function callerKey(caller: ToolCaller): string {
  return `${caller.agentId}\u0000${caller.depth}\u0000${caller.sandboxed ? 1 : 0}`;
}

export class ToolRegistry {
  readonly #tools = new Map<string, SessionTool>();
  readonly #specs = new WeakMap<object, Map<string, readonly ToolSpec[]>>();
  readonly #schemas = new WeakMap<object, Map<string, z.ZodType>>();

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

  /**
   * RPC `tools.list` / `/tools`: the session's effective tools (with their JSON schemas, which the
   * MCP bridge serves) and every tool removed, with the layer that removed it.
   */
  report(
    services: Services,
    caller: ToolCaller,
  ): {
    tools: Array<{ name: string; description: string; parameters: Record<string, unknown> }>;
    removed: Array<{ name: string; by: string; reason: string }>;
  } {
    const { removed } = toolReport(toolPolicyInput(services.config, caller, this.names()));
    return {
      tools: this.specs(services, caller).map((s) => ({
        name: s.name,
        description: s.description,
        parameters: s.parameters,
      })),
      removed: removed.sort((a, b) => a.name.localeCompare(b.name)),
    };
  }

  /** The tools' JSON schemas the model sees; built once per (config, agent, depth, sandbox). */
  specs(services: Services, caller: ToolCaller): readonly ToolSpec[] {
    let byCaller = this.#specs.get(services.config);
    if (!byCaller) {
      byCaller = new Map();
      this.#specs.set(services.config, byCaller);
    }
    const key = callerKey(caller);
    const hit = byCaller.get(key);
    if (hit) return hit;
    const out: ToolSpec[] = [];
    for (const name of this.allowedFor(services, caller)) {
      const tool = this.#tools.get(name);
      if (!tool) continue;
      const json = z.toJSONSchema(this.#schema(tool, services, caller), {
        io: "input",
        unrepresentable: "any",
      }) as Record<string, unknown>;
      delete json.$schema;
      out.push(Object.freeze({ name, description: tool.description, parameters: json }));
    }
    const specs = Object.freeze(out.sort((a, b) => a.name.localeCompare(b.name)));
    byCaller.set(key, specs);
    return specs;
  }

  #schema(tool: SessionTool, services: Services, caller: ToolCaller): z.ZodType {
    let byKey = this.#schemas.get(services.config);
    if (!byKey) {
      byKey = new Map();
      this.#schemas.set(services.config, byKey);
    }
    const key = `${tool.name}\u0000${callerKey(caller)}`;
    let schema = byKey.get(key);
    if (!schema) {
      schema = tool.schema({ services, caller });
      byKey.set(key, schema);
    }
    return schema;
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

  /** What the approval policy needs of a tool: MCP or not, and its read-only hint. */
  traits(name: string): ToolTraits {
    const tool = this.#tools.get(name);
    if (!tool) return { mcp: name.includes("__") };
    if (tool.server === undefined) return { mcp: false };
    return {
      mcp: true,
      ...(tool.annotations?.readOnlyHint !== undefined ? { readOnly: tool.annotations.readOnlyHint } : {}),
    };
  }

  /**
   * `guard` (a model turn's approval gate) gets the validated args and decides whether and when
   * `run` executes the tool; without it the tool runs at once.
   */
  async invoke(
    name: string,
    rawArgs: unknown,
    ctx: ToolContext,
    guard?: (args: unknown, run: () => Promise<ToolResult>) => Promise<ToolResult>,
  ): Promise<InvokeOutcome> {
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
    const parsed = this.#schema(tool, ctx.services, ctx.caller).safeParse(rawArgs ?? {});
    if (!parsed.success) {
      return { ok: false, code: "INVALID_PARAMS", message: formatIssues(parsed.error.issues, `${name}: `) };
    }
    const run = () => tool.execute(parsed.data, ctx);
    return { ok: true, result: guard ? await guard(parsed.data, run) : await run() };
  }
}
