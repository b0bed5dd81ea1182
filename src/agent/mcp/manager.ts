import type { Config } from "../../config/schema.js";
import { errorMessage } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { ToolResult } from "../../tools/types.js";
import type { McpConnection } from "./connection.js";
import { type McpImageSink, mapToolResult } from "./result.js";
import { McpCallError, type McpToolInfo, type RemoteTool } from "./types.js";

/**
 * The MCP servers of this process (API.md §8.3): one connection per `mcp.servers` entry, shared by
 * every agent that names it and every session of those agents (100 parallel sessions hold one
 * server process). Lives in the process that runs turns (a bullmq worker runs its own), started
 * lazily; `stop()` stops every server with its process group.
 */

export type McpTool = RemoteTool;

export interface McpManagerOptions {
  config: Config;
  logger: Logger;
  baseDir: string;
  version: string;
  now?: () => number;
  /** Images from tools into the media store; absent: the model gets a one-line note. */
  images?: McpImageSink;
}

export class McpManager {
  readonly #connections = new Map<string, McpConnection>();
  readonly #opening = new Map<string, Promise<McpConnection>>();
  readonly #options: McpManagerOptions;
  #generation = 0;
  #stopped = false;

  constructor(options: McpManagerOptions) {
    this.#options = options;
  }

  /** The server's connection, made on first use (the SDK is loaded then, not at start-up). */
  #open(name: string): Promise<McpConnection> | undefined {
    const cfg = this.#options.config.mcp.servers[name];
    if (!cfg || this.#stopped) return undefined;
    let opening = this.#opening.get(name);
    if (!opening) {
      opening = import("./connection.js").then(({ McpConnection }) => {
        const c = new McpConnection(name, cfg, {
          logger: this.#options.logger,
          baseDir: this.#options.baseDir,
          version: this.#options.version,
          now: this.#options.now ?? Date.now,
          onToolsChanged: () => {
            this.#generation++;
          },
        });
        this.#connections.set(name, c);
        return c;
      });
      this.#opening.set(name, opening);
    }
    return opening;
  }

  /** Changes whenever a server's tool list does (caches of tool specs key on it). */
  get generation(): number {
    return this.#generation;
  }

  /** The `mcp.servers` names the agent may use (`agents.list[].mcp`). */
  serversOf(agentId: string): readonly string[] {
    return this.#options.config.agents.list.find((a) => a.id === agentId)?.mcp ?? [];
  }

  connection(server: string): McpConnection | undefined {
    return this.#connections.get(server);
  }

  /**
   * Starts (or waits for) each of the agent's servers, within their start timeouts. A server that
   * cannot start is logged and its tools are absent until it can.
   */
  async prepare(agentId: string, signal?: AbortSignal): Promise<void> {
    const servers = this.serversOf(agentId);
    if (servers.length === 0) return;
    const pending: Promise<void>[] = [];
    for (const name of servers) {
      const known = this.#connections.get(name);
      if (known && (known.state === "up" || known.state === "stopped")) continue;
      // a server that died after it was up restarts on its own timer: a turn does not wait for its
      // backoff (its tools stay listed; a call to one waits for the restart within its timeout)
      if (known?.state === "down" && known.tools().length > 0) continue;
      const opening = this.#open(name);
      if (!opening) continue;
      pending.push(
        opening
          .then((c) => c.ensure(undefined, signal))
          .catch((err) => {
            this.#options.logger.warn({ mcpServer: name, err: errorMessage(err) }, "MCP server unavailable");
          }),
      );
    }
    if (pending.length > 0) await Promise.all(pending);
  }

  /** The agent's MCP tools as last listed (call `prepare` first to start its servers). */
  toolsOf(agentId: string): McpTool[] {
    const out: McpTool[] = [];
    for (const name of this.serversOf(agentId)) out.push(...(this.#connections.get(name)?.tools() ?? []));
    return out;
  }

  /** The agent's MCP tool of this model-facing name, if any. */
  find(agentId: string, name: string): McpTool | undefined {
    const i = name.indexOf("__");
    if (i <= 0) return undefined;
    const server = name.slice(0, i);
    if (!this.serversOf(agentId).includes(server)) return undefined;
    return this.#connections.get(server)?.tool(name.slice(i + 2));
  }

  /** Server, tool and annotations of a model-facing name (any agent's), as last listed. */
  describe(name: string): McpToolInfo | undefined {
    const i = name.indexOf("__");
    if (i <= 0) return undefined;
    const t = this.#connections.get(name.slice(0, i))?.tool(name.slice(i + 2));
    return t ? { server: t.server, tool: t.tool, annotations: t.annotations } : undefined;
  }

  /** Server, tool and annotations of a model-facing name the agent has, for approvals. */
  info(agentId: string, name: string): McpToolInfo | undefined {
    const t = this.find(agentId, name);
    return t ? { server: t.server, tool: t.tool, annotations: t.annotations } : undefined;
  }

  /**
   * Calls the tool (arguments already validated); the result as the model gets it. Never throws:
   * a dead, hanging or misbehaving server is `{ status: "error", error }`.
   */
  async call(tool: McpTool, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult> {
    const c = this.#connections.get(tool.server);
    if (!c) return { status: "error", error: `MCP server "${tool.server}" is not configured` };
    let raw: unknown;
    try {
      raw = await c.call(tool.tool, args, signal);
    } catch (err) {
      const message = err instanceof McpCallError ? err.message : `${tool.name} failed: ${errorMessage(err)}`;
      this.#options.logger.info(
        { mcpServer: tool.server, tool: tool.tool, err: message },
        "MCP tool call failed",
      );
      return { status: "error", error: message };
    }
    try {
      return await mapToolResult(raw, {
        maxResultChars: c.config.maxResultChars,
        signal,
        ...(this.#options.images ? { images: this.#options.images } : {}),
      });
    } catch (err) {
      return { status: "error", error: `${tool.name}: the result could not be read: ${errorMessage(err)}` };
    }
  }

  /** Stops every server (stdio: SIGTERM to its process group, SIGKILL after 2 s). */
  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all([...this.#opening.values()].map(async (c) => (await c).stop()));
  }
}
