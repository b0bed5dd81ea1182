/**
 * The loopback MCP server of `bench/mcp.ts`: the installed SDK's server over stdio with two tools,
 * `echo` (returns its text) and `cpu` (this process's CPU time so far, in µs), so the bench can
 * tell the gateway's CPU from the server's own.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new Server({ name: "bench", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "echo",
      description: "Returns its text.",
      inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      annotations: { readOnlyHint: true },
    },
    { name: "cpu", description: "CPU µs of the server.", inputSchema: { type: "object", properties: {} } },
  ],
}));
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  if (req.params.name === "cpu") {
    const u = process.cpuUsage();
    return { content: [{ type: "text", text: String(u.user + u.system) }] };
  }
  return { content: [{ type: "text", text: String(req.params.arguments?.text ?? "") }] };
});
await server.connect(new StdioServerTransport());
