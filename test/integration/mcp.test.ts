import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SwitchboardError } from "../../src/errors.js";
import { serveMcp } from "../../src/mcp/server.js";
import { startTestApp, type TestApp } from "../harness.js";

/** `switchboard mcp`: an MCP client sees the session tools of one session, with the same policy. */

let t: TestApp;
let client: Client;

beforeAll(async () => {
  t = await startTestApp({ tools: { profile: "messaging" } });
  await t.rpc("chat.send", { sessionKey: "main", message: "hello", timeoutSeconds: 20 });
  // The RPC client the CLI would use, backed by the in-process dispatcher.
  const rpc = {
    async call<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
      const r = await t.app.rpc.dispatch({ id: 1, method, params });
      if (!r.ok) throw new SwitchboardError(r.error.code, `${r.error.code}: ${r.error.message}`);
      return r.result as T;
    },
  };
  const [a, b] = InMemoryTransport.createLinkedPair();
  await serveMcp(rpc, "main", "test", a);
  client = new Client({ name: "test", version: "1" });
  await client.connect(b);
});

afterAll(async () => {
  await client?.close();
  await t?.stop();
});

describe("MCP server", () => {
  it("lists exactly the tools the session's profile allows, with JSON schemas", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((x) => x.name).sort()).toEqual([
      "session_status",
      "sessions_history",
      "sessions_list",
      "sessions_send",
    ]);
    const history = tools.find((x) => x.name === "sessions_history");
    expect(history?.inputSchema.type).toBe("object");
    expect(Object.keys(history?.inputSchema.properties ?? {})).toContain("sessionKey");
  });

  it("calls a tool as the session", async () => {
    const r = await client.callTool({ name: "sessions_list", arguments: {} });
    const body = JSON.parse((r.content as Array<{ text: string }>)[0]!.text);
    expect(body.sessions.map((s: { key: string }) => s.key)).toContain("main");
  });

  it("a tool outside the profile is an error result naming the setting", async () => {
    const r = await client.callTool({ name: "sessions_spawn", arguments: { task: "x" } });
    expect(r.isError).toBe(true);
    expect((r.content as Array<{ text: string }>)[0]!.text).toMatch(/FORBIDDEN.*tools\.profile/);
  });
});
