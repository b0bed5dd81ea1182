/**
 * The MCP client's types, apart from the client itself: the SDK (client, transports, ajv) is loaded
 * only when a server is first used (connection.ts is imported dynamically), so a gateway without
 * MCP servers never loads it.
 */

/** MCP tool annotations (hints from the server; approvals follow `readOnlyHint`). */
export interface McpToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** What the rest of the gateway may know about an MCP tool (src/approvals uses it). */
export interface McpToolInfo {
  /** The `mcp.servers` name. */
  server: string;
  /** The tool's own name on its server. */
  tool: string;
  annotations: McpToolAnnotations;
}

export interface RemoteTool extends McpToolInfo {
  /** The name the model sees: `<server>__<tool>`. */
  name: string;
  description: string;
  /** The server's JSON schema of the arguments, as the model sees it. */
  parameters: Record<string, unknown>;
  /** Checks arguments against `parameters`; the message names the field. */
  validate(args: unknown): { ok: true } | { ok: false; message: string };
}

export class McpCallError extends Error {
  constructor(
    message: string,
    readonly kind: "timeout" | "down" | "closed" | "protocol" | "aborted",
  ) {
    super(message);
    this.name = "McpCallError";
  }
}
