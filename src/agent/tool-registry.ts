import { z } from "zod";
import type { ToolTraits } from "../approvals/policy.js";
import { formatIssues } from "../errors.js";
import {
  explainDenied,
  resolveToolSet,
  type ToolSetInput,
  toolPolicyInput,
  toolReport,
} from "../policy/tool-policy.js";
import type { Services } from "../services/index.js";
import type { ToolSpec } from "../services/models.js";
import type { SessionTool, ToolCaller, ToolContext, ToolResult } from "../tools/types.js";
import type { McpManager, McpTool } from "./mcp/manager.js";
import type { McpToolInfo } from "./mcp/types.js";

/**
 * Which tools a caller may use, their JSON schemas, and invocation with validation. The model
 * path and `tools.invoke` both go through `invoke`, so they get exactly the same checks.
 */

export type InvokeOutcome =
  | { ok: true; result: ToolResult }
  | { ok: false; code: "FORBIDDEN" | "INVALID_PARAMS" | "NOT_FOUND"; message: string };

/** One entry of `tools.list` / `/tools`: MCP tools carry their server. */
export interface ToolListEntry {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  server?: string;
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

  /** `mcp`: the process's MCP servers, whose tools join each agent's set (API.md §8.3). */
  constructor(
    tools: SessionTool[],
    readonly mcp?: McpManager,
  ) {
    for (const t of tools) this.#tools.set(t.name, t);
  }

  names(): string[] {
    return [...this.#tools.keys()];
  }

  /**
   * Starts (or waits for) the caller's agent's MCP servers, so its MCP tools are listed; bounded by
   * each server's timeout. A no-op for an agent without MCP servers, or once they are up.
   */
  async prepare(caller: Pick<ToolCaller, "agentId">, signal?: AbortSignal): Promise<void> {
    await this.mcp?.prepare(caller.agentId, signal);
  }

  /** For approvals: the MCP server, tool and annotations behind a model-facing name, if it is one. */
  mcpInfo(agentId: string, name: string): McpToolInfo | undefined {
    return this.#tools.has(name) ? undefined : this.mcp?.info(agentId, name);
  }

  #mcpTools(caller: ToolCaller): McpTool[] {
    return this.mcp?.toolsOf(caller.agentId) ?? [];
  }

  /** The policy input of a caller: the session tools, plus the agent's MCP tools when it has any. */
  #policy(services: Services, caller: ToolCaller): ToolSetInput {
    const mcp = this.#mcpTools(caller).map((t) => t.name);
    if (mcp.length === 0) return toolPolicyInput(services.config, caller);
    return toolPolicyInput(services.config, caller, [...this.names(), ...mcp], mcp);
  }

  allowedFor(services: Services, caller: ToolCaller): Set<string> {
    const mcp = new Set(this.#mcpTools(caller).map((t) => t.name));
    const set = resolveToolSet(this.#policy(services, caller));
    return new Set([...set].filter((n) => this.#tools.has(n) || mcp.has(n)));
  }

  /**
   * RPC `tools.list` / `/tools`: the session's effective tools (with their JSON schemas, which the
   * MCP bridge serves) and every tool removed, with the layer that removed it.
   */
  report(
    services: Services,
    caller: ToolCaller,
  ): {
    tools: ToolListEntry[];
    removed: Array<{ name: string; by: string; reason: string }>;
  } {
    const mcp = this.#mcpTools(caller);
    const input = this.#policy(services, caller);
    const { removed } = toolReport(
      mcp.length > 0 ? input : toolPolicyInput(services.config, caller, this.names()),
    );
    const servers = new Map(mcp.map((t) => [t.name, t.server]));
    return {
      tools: this.specs(services, caller).map((s) => {
        const server = servers.get(s.name);
        return {
          name: s.name,
          description: s.description,
          parameters: s.parameters,
          ...(server ? { server } : {}),
        };
      }),
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
    // MCP tool lists change as servers start and restart: their generation is part of the key
    const key = `${callerKey(caller)}\u0000${this.mcp?.generation ?? 0}`;
    const hit = byCaller.get(key);
    if (hit) return hit;
    const out: ToolSpec[] = [];
    const mcp = new Map(this.#mcpTools(caller).map((t) => [t.name, t]));
    for (const name of this.allowedFor(services, caller)) {
      const tool = this.#tools.get(name);
      const remote = mcp.get(name);
      if (remote)
        out.push(Object.freeze({ name, description: remote.description, parameters: remote.parameters }));
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

  /** What the approval policy needs of a tool: MCP or not, and its read-only hint (MCP annotations). */
  traits(name: string): ToolTraits {
    const tool = this.#tools.get(name);
    if (!tool) {
      const info = this.mcp?.describe(name);
      if (!info) return { mcp: name.includes("__") };
      const hint = info.annotations.readOnlyHint;
      return { mcp: true, ...(hint !== undefined ? { readOnly: hint } : {}) };
    }
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
    if (!tool && this.mcp && name.includes("__")) return this.#invokeMcp(name, rawArgs, ctx, guard);
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
          explainDenied(name, this.#policy(ctx.services, ctx.caller)) ??
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

  /** An MCP tool: the same policy check, then the server's own schema, then the call. */
  async #invokeMcp(
    name: string,
    rawArgs: unknown,
    ctx: ToolContext,
    guard?: (args: unknown, run: () => Promise<ToolResult>) => Promise<ToolResult>,
  ): Promise<InvokeOutcome> {
    const mcp = this.mcp!;
    await mcp.prepare(ctx.caller.agentId, ctx.signal);
    const tool = mcp.find(ctx.caller.agentId, name);
    if (!tool) {
      const server = name.slice(0, name.indexOf("__"));
      const known = mcp.serversOf(ctx.caller.agentId).includes(server);
      return {
        ok: false,
        code: known ? "NOT_FOUND" : "FORBIDDEN",
        message: known
          ? `MCP server "${server}" has no tool "${name.slice(server.length + 2)}" (or it is not running)`
          : `tool ${name} is not available to agent ${ctx.caller.agentId} (its agents.list[].mcp does not name "${server}")`,
      };
    }
    const denied = explainDenied(name, this.#policy(ctx.services, ctx.caller));
    if (denied !== null) return { ok: false, code: "FORBIDDEN", message: denied };
    const args = rawArgs ?? {};
    const valid = tool.validate(args);
    if (!valid.ok) return { ok: false, code: "INVALID_PARAMS", message: `${name}: ${valid.message}` };
    // validated against the server's own schema: an object
    const run = () => mcp.call(tool, args as Record<string, unknown>, ctx.signal);
    return { ok: true, result: guard ? await guard(args, run) : await run() };
  }
}
