import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { SwitchboardError } from "../../src/errors.js";
import { RpcClient } from "../../src/gateway/client.js";
import { serveMcp } from "../../src/mcp/server.js";
import { startTestApp, type TestApp } from "../harness.js";
import { freePort } from "../redis.js";

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
      "message",
      "session_status",
      "sessions_history",
      "sessions_list",
      "sessions_send",
    ]);
    const history = tools.find((x) => x.name === "sessions_history");
    expect(history?.inputSchema.type).toBe("object");
    expect(Object.keys(history?.inputSchema.properties ?? {})).toContain("sessionKey");
  });

  it("RPC tools.list reports the tools and which layer removed the others", async () => {
    const r = await t.rpc("tools.list", { sessionKey: "main" });
    expect(r.ok).toBe(true);
    expect(r.result.tools.map((x: { name: string }) => x.name).sort()).toEqual([
      "message",
      "session_status",
      "sessions_history",
      "sessions_list",
      "sessions_send",
    ]);
    expect(r.result.tools[0]).toMatchObject({ name: expect.any(String), description: expect.any(String) });
    const removed = Object.fromEntries(
      r.result.removed.map((x: { name: string; by: string }) => [x.name, x.by]),
    );
    expect(removed).toMatchObject({
      sessions_spawn: "profile",
      subagents: "profile",
      agents_list: "profile",
    });
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

describe("MCP server: a fresh gateway and failures before serving", () => {
  let fresh: TestApp;
  beforeAll(async () => {
    fresh = await startTestApp({ gateway: { auth: { token: "mcp-right-token" } } }, { listen: true });
  });
  afterAll(async () => {
    await fresh?.stop();
  });
  const base = () => `http://127.0.0.1:${fresh.app.address?.port}`;

  it("serves session main before anyone chatted (the main session is created on first use)", async () => {
    const [a, b] = InMemoryTransport.createLinkedPair();
    await serveMcp(new RpcClient(base(), "mcp-right-token"), "main", "test", a);
    const c = new Client({ name: "fresh", version: "1" });
    await c.connect(b);
    try {
      const { tools } = await c.listTools();
      expect(tools.map((x) => x.name)).toContain("sessions_list");
      const r = await c.callTool({ name: "session_status", arguments: {} });
      expect(r.isError).toBeFalsy();
      // A business failure is an error result too.
      const h = await c.callTool({ name: "sessions_history", arguments: { sessionKey: "agent:main:nope" } });
      expect(h.isError).toBe(true);
      expect((h.content as Array<{ text: string }>)[0]!.text).toContain("agent:main:nope");
    } finally {
      await c.close();
    }
  });

  it.each([
    [
      "an unknown session",
      () => new RpcClient(base(), "mcp-right-token"),
      "agent:main:nope",
      /NOT_FOUND.*agent:main:nope/,
    ],
    ["a wrong token", () => new RpcClient(base(), "wrong-token-0000"), "main", /UNAUTHORIZED/],
  ])("refuses to serve %s, with one clear message", async (_name, client, key, re) => {
    const [a] = InMemoryTransport.createLinkedPair();
    await expect(serveMcp(client(), key, "test", a)).rejects.toThrow(re);
  });

  it("the CLI exits non-zero with one line when no gateway answers", async () => {
    const port = await freePort();
    const lines: string[] = [];
    const code = await main(["mcp", "--url", `http://127.0.0.1:${port}`, "--token", "x-token-123"], {
      out: (s) => lines.push(`out:${s}`),
      err: (s) => lines.push(s),
    });
    expect(code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^switchboard: mcp: cannot serve session "main": cannot reach the gateway/);
  });
});
