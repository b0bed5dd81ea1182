/**
 * A real MCP server for tests, built with the installed SDK's server API (low-level `Server`, so a
 * tool may declare a schema it does not keep). Two ways to reach it:
 *   - stdio: `mcpStdioServer()` is the `mcp.servers.<name>` entry that runs test/fakes/mcp-stdio.ts
 *     in a child process (its build when dist/ is fresh, else `node --import tsx`);
 *   - Streamable HTTP: `startMcpHttpFake()` listens on 127.0.0.1 (random port), stateless (one
 *     Server per request), and records the headers it was sent.
 *
 * Tools: read_note (readOnlyHint), write_note, snapshot (an image), note_resource (an embedded
 * resource), whoami (the server's pid and call count), spawn_child (a grandchild process, for the
 * process-group test), and misbehaviour: lying_schema (declares `count: string`, wants a number),
 * lying_output (structuredContent against its outputSchema), huge_text (10 MB), malformed (a result
 * that is not a CallToolResult), hang (never answers), crash (exits mid-call).
 */
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CallToolRequestSchema,
  type JSONRPCMessage,
  ListToolsRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { scriptArgs } from "../../bench/proc.js";

/** A 1×1 red PNG. */
export const FAKE_PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
  "base64",
);
export const HUGE_TEXT_CHARS = 10 * 1024 * 1024;

const obj = (properties: Record<string, object>, required: string[] = []) => ({
  type: "object" as const,
  properties,
  required,
  additionalProperties: false,
});

export const FAKE_TOOLS: Tool[] = [
  {
    name: "read_note",
    description: "Reads a note by name.",
    inputSchema: obj({ name: { type: "string", minLength: 1 } }, ["name"]),
    annotations: { readOnlyHint: true, title: "Read a note" },
  },
  {
    name: "write_note",
    description: "Writes a note.",
    inputSchema: obj({ name: { type: "string", minLength: 1 }, text: { type: "string" } }, ["name", "text"]),
  },
  { name: "snapshot", description: "A picture of the notes.", inputSchema: obj({}) },
  {
    name: "note_resource",
    description: "A note as an embedded resource.",
    inputSchema: obj({ name: { type: "string" } }, ["name"]),
  },
  { name: "whoami", description: "The server's pid.", inputSchema: obj({}) },
  { name: "spawn_child", description: "Starts a long-lived grandchild process.", inputSchema: obj({}) },
  {
    name: "lying_schema",
    description: "Says count is a string; wants a number.",
    inputSchema: obj({ count: { type: "string" } }, ["count"]),
  },
  {
    name: "lying_output",
    description: "Declares an output schema it does not keep.",
    inputSchema: obj({}),
    outputSchema: obj({ n: { type: "number" } }, ["n"]),
  },
  { name: "huge_text", description: "10 MB of text.", inputSchema: obj({}) },
  { name: "malformed", description: "A result that is not a tool result.", inputSchema: obj({}) },
  { name: "hang", description: "Never answers.", inputSchema: obj({}) },
  { name: "crash", description: "Exits mid-call.", inputSchema: obj({}) },
];

export interface FakeMcpHooks {
  /** `crash`: what "exit" means for this transport (stdio: the process exits). */
  crash(): void;
}

/** The server with every tool; `notes` is shared state (one per process or per HTTP fake). */
export function buildFakeMcpServer(notes: Map<string, string>, hooks: FakeMcpHooks): Server {
  const server = new Server({ name: "fake-notes", version: "1.0.0" }, { capabilities: { tools: {} } });
  let calls = 0;
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: FAKE_TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    calls++;
    const args = (req.params.arguments ?? {}) as Record<string, unknown>;
    process.stderr.write(`fake-mcp: call ${req.params.name}\n`);
    const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] });
    switch (req.params.name) {
      case "read_note": {
        const note = notes.get(String(args.name));
        return note === undefined
          ? { ...text(`no note named ${String(args.name)}`), isError: true }
          : text(note);
      }
      case "write_note":
        notes.set(String(args.name), String(args.text));
        return text(`saved ${String(args.name)}`);
      case "snapshot":
        return {
          content: [
            { type: "text" as const, text: "the notes board:" },
            { type: "image" as const, data: FAKE_PNG.toString("base64"), mimeType: "image/png" },
          ],
        };
      case "note_resource":
        return {
          content: [
            {
              type: "resource" as const,
              resource: {
                uri: `note://${String(args.name)}`,
                mimeType: "text/plain",
                text: notes.get(String(args.name)) ?? "",
              },
            },
          ],
        };
      case "whoami":
        return text(`pid=${process.pid} calls=${calls}`);
      case "spawn_child": {
        const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
        return text(`child=${child.pid}`);
      }
      case "lying_schema":
        if (typeof args.count !== "number")
          return { ...text("count must be a number, despite what the schema says"), isError: true };
        return text(`count=${args.count}`);
      case "lying_output":
        return { ...text("n is a string"), structuredContent: { n: "not a number" } };
      case "huge_text":
        return text("x".repeat(HUGE_TEXT_CHARS));
      case "malformed":
        // rewritten on its way out (see `malformOutgoing`)
        return text("MALFORM-ME");
      case "hang":
        return new Promise<never>((_resolve, reject) => {
          extra.signal.addEventListener("abort", () => reject(new Error("cancelled")), { once: true });
        });
      case "crash":
        hooks.crash();
        return new Promise<never>(() => {});
      default:
        return { ...text(`unknown tool ${req.params.name}`), isError: true };
    }
  });
  return server;
}

/**
 * The `malformed` tool's answer leaves the server as a result no client can read (`content` is a
 * string): the server SDK validates what a handler returns, so the fault is injected below it.
 */
export function malformOutgoing(transport: Transport): void {
  const send = transport.send.bind(transport);
  transport.send = (message: JSONRPCMessage, options) => {
    const m = message as { result?: { content?: Array<{ text?: string }> } };
    if (m.result?.content?.[0]?.text === "MALFORM-ME") {
      return send({ ...message, result: { content: "not a list", isError: "maybe" } } as never, options);
    }
    return send(message, options);
  };
}

/** An `mcp.servers` entry running the stdio fake (env and cwd as given), built when dist/ is fresh. */
export function mcpStdioServer(extra: { env?: Record<string, string>; timeoutSeconds?: number } = {}) {
  return {
    command: process.execPath,
    args: scriptArgs("test/fakes/mcp-stdio.ts"),
    ...(extra.env ? { env: extra.env } : {}),
    ...(extra.timeoutSeconds !== undefined ? { timeoutSeconds: extra.timeoutSeconds } : {}),
  };
}

export interface McpHttpFake {
  url: string;
  notes: Map<string, string>;
  /** Headers of every request, in order. */
  headers: http.IncomingHttpHeaders[];
  close(): Promise<void>;
}

/** The fake over Streamable HTTP on 127.0.0.1 (random port), stateless. `crash` drops every connection. */
export async function startMcpHttpFake(): Promise<McpHttpFake> {
  const notes = new Map<string, string>();
  const headers: http.IncomingHttpHeaders[] = [];
  const httpServer = http.createServer(async (req, res) => {
    headers.push(req.headers);
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const server = buildFakeMcpServer(notes, { crash: () => httpServer.closeAllConnections() });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    malformOutgoing(transport);
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve));
  const { port } = httpServer.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    notes,
    headers,
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.closeAllConnections();
        httpServer.close(() => resolve());
      }),
  };
}
