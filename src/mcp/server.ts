import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import type { RpcClient } from "../gateway/client.js";

/**
 * `switchboard mcp`: the session tools over MCP. Each call goes to the running gateway as
 * `tools.invoke` for one session, so an external agent gets exactly the checks a model would
 * (tool profile, visibility, send policy, spawn limits). The gateway stays the only process that
 * owns the state.
 */

interface ToolSpecWire {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

function isFailure(result: unknown): boolean {
  if (!result || typeof result !== "object") return false;
  const status = (result as { status?: unknown }).status;
  return status === "error" || status === "forbidden";
}

export function createMcpServer(
  client: Pick<RpcClient, "call">,
  sessionKey: string,
  version: string,
): Server {
  const server = new Server({ name: "switchboard", version }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const { tools } = await client.call<{ tools: ToolSpecWire[] }>("tools.list", { sessionKey });
    return {
      tools: tools.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: { type: "object" as const, ...t.parameters },
      })),
    };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    try {
      const result = await client.call("tools.invoke", {
        sessionKey,
        tool: req.params.name,
        args: req.params.arguments ?? {},
      });
      // A business failure (status "error" / "forbidden") is a tool error like an RPC error is.
      return {
        content: [{ type: "text" as const, text: JSON.stringify(result) }],
        ...(isFailure(result) ? { isError: true } : {}),
      };
    } catch (err) {
      return { content: [{ type: "text" as const, text: errorMessage(err) }], isError: true };
    }
  });
  return server;
}

export async function serveMcp(
  client: Pick<RpcClient, "call">,
  sessionKey: string,
  version: string,
  transport?: Transport,
): Promise<Server> {
  // Fail fast, before serving: a gateway that is down, a wrong token or an invalid session would
  // otherwise fail every call of the connected agent.
  try {
    await client.call("tools.list", { sessionKey });
  } catch (err) {
    throw new SwitchboardError(
      err instanceof SwitchboardError ? err.code : "UNAVAILABLE",
      `mcp: cannot serve session ${JSON.stringify(sessionKey)}: ${errorMessage(err)}`,
    );
  }
  const server = createMcpServer(client, sessionKey, version);
  await server.connect(transport ?? new StdioServerTransport());
  return server;
}
