import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { z } from "zod";
import type { McpServerConfig } from "../../config/mcp.js";
import { errorMessage, formatIssues } from "../../errors.js";
import type { Logger } from "../../log.js";
import { backoffDelayMs } from "../../retry/backoff.js";
import { cappedFetch } from "./http.js";
import { GroupStdioTransport } from "./stdio.js";
import { McpCallError, type RemoteTool } from "./types.js";

/**
 * One MCP server: started on first use (stdio) or connected (Streamable HTTP), its tools listed
 * and their argument validators compiled once, shared by every session of every agent that names
 * it. When a stdio server dies it is restarted with backoff (0.5 s doubling to 30 s; reset once it
 * has stayed up 30 s); a call while it is down waits for the restart within its own timeout, else
 * fails. Every wait is bounded by the server's `timeoutSeconds`.
 */

const annotationsSchema = z
  .object({
    title: z.string().max(200).optional(),
    readOnlyHint: z.boolean().optional(),
    destructiveHint: z.boolean().optional(),
    idempotentHint: z.boolean().optional(),
    openWorldHint: z.boolean().optional(),
  })
  .catch({});

const listedToolSchema = z.object({
  name: z.string().min(1).max(128),
  description: z.string().optional(),
  inputSchema: z.looseObject({ type: z.literal("object") }),
  annotations: annotationsSchema.optional(),
});

const listResultSchema = z.object({
  tools: z.array(z.unknown()).max(1000),
  nextCursor: z.string().optional(),
});

/** The model-facing name; providers accept ^[A-Za-z0-9_-]{1,64}$. */
const MODEL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_DESCRIPTION = 4096;
const MAX_LIST_PAGES = 20;
/** Largest single message from a stdio server or HTTP response (a 10 MB text result fits). */
export const MAX_MESSAGE_BYTES = 32 * 1024 * 1024;
const BACKOFF = { baseDelayMs: 500, maxDelayMs: 30_000 };
const STABLE_MS = 30_000;

export interface ConnectionDeps {
  logger: Logger;
  /** Relative `cwd` resolves against this (the config file's directory). */
  baseDir: string;
  version: string;
  now(): number;
  /** Called whenever the server's tool list changes (a start, a restart, list_changed). */
  onToolsChanged(): void;
}

type State = "idle" | "starting" | "up" | "down" | "stopped";

export class McpConnection {
  #state: State = "idle";
  #client: Client | undefined;
  #transport: Transport | undefined;
  #starting: Promise<void> | undefined;
  #tools = new Map<string, RemoteTool>();
  #failures = 0;
  #upAt = 0;
  #retryAt = 0;
  #lastError = "";
  #restartTimer: NodeJS.Timeout | undefined;
  /** Why an HTTP connection was given up (the next call reconnects). */
  #dropReason: string | undefined;
  readonly #validator = new AjvJsonSchemaValidator();
  readonly #log: Logger;

  constructor(
    readonly name: string,
    readonly config: McpServerConfig,
    private readonly deps: ConnectionDeps,
  ) {
    this.#log = deps.logger.child({ mcpServer: name });
  }

  get timeoutMs(): number {
    return this.config.timeoutSeconds * 1000;
  }

  /** A start (spawn, initialize, list tools) may take longer than a call (`npx` downloads first). */
  get startTimeoutMs(): number {
    return this.config.startTimeoutSeconds * 1000;
  }

  get state(): State {
    return this.#state;
  }

  /** The stdio server's pid while it runs. */
  get pid(): number | undefined {
    return this.#transport instanceof GroupStdioTransport ? this.#transport.pid : undefined;
  }

  /** The tools as last listed (empty until the first start). */
  tools(): RemoteTool[] {
    return [...this.#tools.values()];
  }

  tool(mcpName: string): RemoteTool | undefined {
    return this.#tools.get(mcpName);
  }

  /** Up, or an McpCallError within the server's timeout (or by `deadline`, when sooner). */
  async ensure(deadline = this.deps.now() + this.startTimeoutMs, signal?: AbortSignal): Promise<void> {
    const started = this.deps.now();
    for (let attempt = 0; attempt < 3; attempt++) {
      if (this.#state === "up") return;
      if (this.#state === "stopped") throw new McpCallError(`MCP server "${this.name}" is stopped`, "down");
      if (this.#state === "down") {
        const wait = this.#retryAt - this.deps.now();
        if (wait > 0) {
          if (this.deps.now() + wait > deadline)
            throw new McpCallError(
              `MCP server "${this.name}" is down (${this.#lastError}); it is restarted in ${Math.ceil(wait / 1000)} s`,
              "down",
            );
          await sleep(wait, signal);
        }
      }
      if (!this.#starting) this.#starting = this.#start();
      await bounded(this.#starting, deadline - this.deps.now(), signal, () => {
        return new McpCallError(
          `MCP server "${this.name}" did not start within ${Math.round((deadline - started) / 1000)} s`,
          "timeout",
        );
      });
    }
    if (this.#state !== "up")
      throw new McpCallError(`MCP server "${this.name}" is not available (${this.#lastError})`, "down");
  }

  async #start(): Promise<void> {
    clearTimeout(this.#restartTimer);
    this.#state = "starting";
    const transport = this.#makeTransport();
    const client = new Client(
      { name: "switchboard", version: this.deps.version },
      {
        jsonSchemaValidator: this.#validator,
        listChanged: {
          tools: {
            onChanged: (err, tools) => {
              if (err || !tools || this.#client !== client) return;
              this.#setTools(tools);
            },
          },
        },
      },
    );
    client.onerror = (err) => this.#log.debug({ err: errorMessage(err) }, "MCP transport error");
    try {
      await this.#connect(client, transport);
      const tools = await this.#list(client);
      this.#client = client;
      this.#dropReason = undefined;
      client.onclose = () => this.#closed(client);
      this.#setTools(tools);
      this.#state = "up";
      this.#upAt = this.deps.now();
      this.#log.info(
        { tools: this.#tools.size, pid: this.pid },
        `MCP server "${this.name}" started with ${this.#tools.size} tools`,
      );
    } catch (err) {
      await client.close().catch(() => undefined);
      this.#down(`could not start: ${explain(err)}`);
      throw new McpCallError(`MCP server "${this.name}" ${this.#lastError}`, "down");
    } finally {
      this.#starting = undefined;
    }
  }

  /**
   * connect (initialize), bounded by the start timeout. Over HTTP a connection the server dropped may
   * still sit in fetch's keep-alive pool: initialize is safe to repeat, so a transport failure is
   * retried twice on a fresh transport.
   */
  async #connect(client: Client, first: Transport): Promise<void> {
    let transport = first;
    for (let attempt = 0; ; attempt++) {
      try {
        await client.connect(transport, { timeout: this.startTimeoutMs });
        this.#transport = transport;
        return;
      } catch (err) {
        if (!this.config.url || attempt >= 2 || !isFetchFailure(err)) throw err;
        await transport.close().catch(() => undefined);
        transport = this.#makeTransport();
      }
    }
  }

  #makeTransport(): Transport {
    const c = this.config;
    if (c.url) {
      return new StreamableHTTPClientTransport(new URL(c.url), {
        requestInit: { headers: c.headers },
        fetch: cappedFetch(MAX_MESSAGE_BYTES),
      });
    }
    return new GroupStdioTransport({
      command: c.command ?? "",
      args: c.args,
      env: c.env,
      ...(c.cwd !== null ? { cwd: path.resolve(this.deps.baseDir, c.cwd) } : {}),
      maxLineBytes: MAX_MESSAGE_BYTES,
      // A server's stderr is for its operator: the log at debug, never a prompt.
      onStderr: (line) => this.#log.debug({ stderr: line.slice(0, 4000) }, "MCP server stderr"),
    });
  }

  async #list(client: Client) {
    const out: unknown[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const res = listResultSchema.parse(
        await client.listTools(cursor ? { cursor } : undefined, { timeout: this.startTimeoutMs }),
      );
      out.push(...res.tools);
      cursor = res.nextCursor;
      if (!cursor) break;
    }
    return out;
  }

  #setTools(listed: unknown[]): void {
    const next = new Map<string, RemoteTool>();
    for (const raw of listed) {
      const t = listedToolSchema.safeParse(raw);
      if (!t.success) {
        this.#log.warn({ issue: t.error.issues[0]?.message }, "MCP server listed a malformed tool; skipped");
        continue;
      }
      const name = `${this.name}__${t.data.name}`;
      if (!MODEL_NAME.test(name)) {
        this.#log.warn(
          { tool: t.data.name },
          `MCP tool name ${name} is not a valid model tool name; skipped`,
        );
        continue;
      }
      let check: (input: unknown) => { valid: boolean; errorMessage?: string | undefined };
      try {
        check = this.#validator.getValidator(t.data.inputSchema as never);
      } catch (err) {
        this.#log.warn(
          { tool: t.data.name, err: errorMessage(err) },
          "MCP tool's input schema does not compile; skipped",
        );
        continue;
      }
      const parameters = { ...t.data.inputSchema };
      delete parameters.$schema;
      next.set(t.data.name, {
        name,
        server: this.name,
        tool: t.data.name,
        description: (t.data.description ?? t.data.annotations?.title ?? "").slice(0, MAX_DESCRIPTION),
        parameters,
        annotations: t.data.annotations ?? {},
        validate: (args) => {
          const r = check(args);
          return r.valid ? { ok: true } : { ok: false, message: fieldMessage(r.errorMessage) };
        },
      });
    }
    this.#tools = next;
    this.deps.onToolsChanged();
  }

  #closed(client: Client): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    const reason =
      this.#transport instanceof GroupStdioTransport
        ? (this.#transport.exitReason ?? "closed")
        : (this.#dropReason ?? "closed the connection");
    this.#transport = undefined;
    if (this.#state === "stopped") return;
    this.#down(reason);
    this.#log.warn(
      { reason, retryInMs: this.#retryAt - this.deps.now() },
      `MCP server "${this.name}" ${reason}; restarting`,
    );
    // restarted when due, whether or not anyone calls it by then
    this.#restartTimer = setTimeout(
      () => {
        if (this.#state !== "down" || this.#starting) return;
        this.#starting = this.#start();
        this.#starting.catch((err) =>
          this.#log.warn({ err: errorMessage(err) }, "MCP server restart failed"),
        );
      },
      Math.max(0, this.#retryAt - this.deps.now()),
    );
    this.#restartTimer.unref();
  }

  #down(reason: string): void {
    const now = this.deps.now();
    this.#failures = this.#upAt > 0 && now - this.#upAt >= STABLE_MS ? 1 : this.#failures + 1;
    this.#upAt = 0;
    this.#lastError = reason;
    this.#retryAt = now + backoffDelayMs(this.#failures - 1, BACKOFF);
    if (this.#state !== "stopped") this.#state = "down";
  }

  /** Calls a tool; failures are McpCallError with a message fit for the model. */
  async call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<unknown> {
    // a start is bounded by the start timeout, then the call by the call timeout
    await this.ensure(this.deps.now() + this.startTimeoutMs, signal);
    const client = this.#client;
    if (!client) throw new McpCallError(`MCP server "${this.name}" is not available`, "down");
    try {
      return await client.callTool({ name: tool, arguments: args }, undefined, {
        signal,
        timeout: this.timeoutMs,
      });
    } catch (err) {
      if (signal.aborted) throw new McpCallError("the call was aborted", "aborted");
      if (err instanceof McpError && err.code === ErrorCode.RequestTimeout)
        throw new McpCallError(
          `MCP server "${this.name}" did not answer ${tool} within ${this.config.timeoutSeconds} s`,
          "timeout",
        );
      if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
        const why = this.#lastError || "closed the connection";
        throw new McpCallError(`MCP server "${this.name}" ended during the call (${why})`, "closed");
      }
      if (this.config.url && isFetchFailure(err)) {
        // the connection is gone: the next call connects afresh (with backoff)
        this.#dropReason = `lost the connection (${explain(err)})`;
        void client.close().catch(() => undefined);
        throw new McpCallError(`MCP server "${this.name}" ${this.#dropReason}`, "closed");
      }
      throw new McpCallError(`MCP server "${this.name}": ${explain(err)}`, "protocol");
    }
  }

  async stop(): Promise<void> {
    this.#state = "stopped";
    clearTimeout(this.#restartTimer);
    const starting = this.#starting;
    if (starting)
      await bounded(starting, this.startTimeoutMs, undefined, () => new Error("start")).catch(
        () => undefined,
      );
    const client = this.#client;
    this.#client = undefined;
    await client?.close().catch(() => undefined);
    this.#transport = undefined;
  }
}

const issuesSchema = z.object({
  issues: z.array(z.object({ path: z.array(z.union([z.string(), z.number()])), message: z.string() })).min(1),
});

/** fetch's own failure (refused, reset, closed by the other side), not an HTTP status. */
function isFetchFailure(err: unknown): boolean {
  return err instanceof TypeError && /fetch failed/i.test(err.message);
}

function explain(err: unknown): string {
  if (err instanceof McpError) return err.message.replace(/^MCP error -?\d+: /, "");
  // the SDK rejects an answer that is not a valid result with the zod error of its schema
  const zod = issuesSchema.safeParse(err);
  if (zod.success)
    return `its answer is malformed (${formatIssues(zod.data.issues.slice(0, 5)).split("\n").join("; ")})`;
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
  return errorMessage(err) + cause;
}

/** ajv's "data/path must be string" → "path must be string" (the field, not "data"). */
function fieldMessage(msg: string | undefined): string {
  if (!msg) return "the arguments do not match the tool's schema";
  return msg
    .split(", ")
    .map((m) => m.replace(/^data\//, "").replace(/^data /, "arguments "))
    .map((m) => m.replace(/\//g, "."))
    .join("; ");
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener("abort", abort);
      resolve();
    }
    function abort() {
      clearTimeout(t);
      reject(new McpCallError("the call was aborted", "aborted"));
    }
    signal?.addEventListener("abort", abort, { once: true });
  });
}

/** `p`, or the error of `onTimeout` after `ms`, or an abort. */
function bounded<T>(
  p: Promise<T>,
  ms: number,
  signal: AbortSignal | undefined,
  onTimeout: () => Error,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => finish(() => reject(onTimeout())), Math.max(0, ms));
    const abort = () => finish(() => reject(new McpCallError("the call was aborted", "aborted")));
    signal?.addEventListener("abort", abort, { once: true });
    function finish(f: () => void) {
      clearTimeout(t);
      signal?.removeEventListener("abort", abort);
      f();
    }
    p.then(
      (v) => finish(() => resolve(v)),
      (e) => finish(() => reject(e)),
    );
  });
}
