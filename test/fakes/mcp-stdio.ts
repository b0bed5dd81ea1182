/**
 * The fake MCP server (test/fakes/mcp.ts) over stdio, as a child process:
 * `node --import tsx test/fakes/mcp-stdio.ts`. Says hello on stderr (which the client logs at debug).
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { buildFakeMcpServer, malformOutgoing } from "./mcp.js";

const server = buildFakeMcpServer(new Map(), { crash: () => process.exit(3) });
const transport = new StdioServerTransport();
malformOutgoing(transport);
process.stderr.write(`fake-mcp: started pid ${process.pid} STDERR-SECRET-LINE\n`);
await server.connect(transport);
