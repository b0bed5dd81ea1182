import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { toolsText } from "../../src/routing/gates/owner-commands.js";
import {
  FAKE_PNG,
  HUGE_TEXT_CHARS,
  type McpHttpFake,
  mcpStdioServer,
  startMcpHttpFake,
} from "../fakes/mcp.js";
import { capturingLogger, startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { pidAlive, pidGone, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * MCP servers as agent tools (API.md §8.3) against the real SDK server in test/fakes/mcp.ts, over
 * stdio (a child process) and Streamable HTTP (loopback): discovery, a real turn calling
 * `<server>__<tool>`, tools.list and /tools, deny rules, every kind of misbehaving server, restart,
 * one process for many sessions, and the process group stopped with the gateway.
 */

/** The scripted model calling the server's tools ("write a b", "read a", "who"); replies quote the result. */
const scripted = (server: string) => ({
  models: {
    default: "s/m",
    providers: {
      s: {
        kind: "scripted" as const,
        rules: [
          ["^write (\\S+) (.*)$", "write_note", { name: "$1", text: "$2" }],
          ["^half-write (\\S+)$", "write_note", { name: "$1" }],
          ["^read (\\S+)$", "read_note", { name: "$1" }],
          ["^who$", "whoami", {}],
          ["^res (\\S+)$", "note_resource", { name: "$1" }],
        ].map(([match, tool, args]) => ({
          match: match as string,
          toolCalls: [{ name: `${server}__${tool as string}`, args: args as Record<string, string> }],
          afterTools: "result: {{lastToolResult}}",
        })),
      },
    },
  },
});

/** Gone within 100 × 50 ms. */
const gone = (pid: number) => pidGone(pid, 100, 50);

const pidOf = (text: unknown) => Number(/pid=(\d+)/.exec(String(text))?.[1]);

describe("an MCP server over stdio", () => {
  let t: TestApp;
  let logs: string[];
  beforeAll(async () => {
    const captured = capturingLogger("debug");
    logs = captured.lines;
    t = await startTestApp(
      {
        ...scripted("notes"),
        mcp: { servers: { notes: mcpStdioServer({ timeoutSeconds: 2 }) } },
        // auto: read_note (readOnlyHint) runs unasked, any other MCP tool asks, unless a rule allows it
        tools: {
          approvals: {
            rules: [
              { tool: "notes__write_note", action: "allow" as const },
              { tool: "notes__whoami", action: "allow" as const },
            ],
          },
        },
        agents: {
          list: [
            { id: "main", mcp: ["notes"] },
            { id: "reader", mcp: ["notes"], tools: { deny: ["notes__write_*"] } },
            { id: "plain" },
          ],
        },
      },
      { logger: captured.logger },
    );
  });
  afterAll(async () => t?.stop());

  it("a real turn calls notes__write_note then notes__read_note; results reach the model and the transcript", async () => {
    const w = await t.rpc("chat.send", {
      sessionKey: "main",
      message: "write todo buy milk",
      timeoutSeconds: 20,
    });
    expect(w.result.status).toBe("ok");
    expect(w.result.reply).toContain("saved todo");
    const r = await t.rpc("chat.send", {
      sessionKey: "main",
      message: "read todo",
      timeoutSeconds: 20,
    });
    expect(r.result.reply).toContain("buy milk");
    const h = await t.rpc("sessions.history", { sessionKey: "main", limit: 20, includeTools: true });
    const results = h.result.messages.filter((m: { role: string }) => m.role === "toolResult");
    expect(results.map((m: { toolName: string }) => m.toolName)).toEqual([
      "notes__write_note",
      "notes__read_note",
    ]);
    expect(JSON.stringify(results.at(-1))).toContain("buy milk");
  });

  it("approvals see the MCP annotations: a tool without readOnlyHint waits for a decision, then runs once", async () => {
    expect(t.app.tools.traits("notes__read_note")).toEqual({ mcp: true, readOnly: true });
    expect(t.app.tools.traits("notes__note_resource")).toEqual({ mcp: true });
    expect(t.app.tools.mcpInfo("main", "notes__read_note")).toEqual({
      server: "notes",
      tool: "read_note",
      annotations: { readOnlyHint: true, title: "Read a note" },
    });
    await t.invoke("main", "notes__write_note", { name: "asked", text: "approved body" });
    const sent = await t.rpc("chat.send", {
      sessionKey: "agent:main:ask",
      message: "res asked",
      timeoutSeconds: 0.5,
    });
    const runId = sent.result.runId;
    const waiting = await t.rpc("runs.get", { runId });
    expect(waiting.result).toMatchObject({
      status: "waiting",
      waitingFor: { tool: "notes__note_resource", args: { name: "asked" } },
    });
    await t.rpc("approvals.resolve", { id: waiting.result.waitingFor.approvalId, decision: "allow-once" });
    const done = await t.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result.status).toBe("ok");
    const run = await t.rpc("runs.get", { runId });
    expect(JSON.stringify(run.result)).toContain("approved body");
  });

  it("tools.list shows each MCP tool as <server>__<tool> with its server, description and JSON schema", async () => {
    const r = await t.rpc("tools.list", { sessionKey: "main" });
    const read = r.result.tools.find((x: { name: string }) => x.name === "notes__read_note");
    expect(read).toMatchObject({
      server: "notes",
      description: "Reads a note by name.",
      parameters: {
        type: "object",
        properties: { name: { type: "string", minLength: 1 } },
        required: ["name"],
      },
    });
    // session tools carry no server
    expect(r.result.tools.find((x: { name: string }) => x.name === "agents_list").server).toBeUndefined();
  });

  it("/tools names the MCP tools with their server", async () => {
    const entry = await t.app.services.store.sessions.get("agent:main:main");
    const text = await toolsText(t.app.services, entry!);
    expect(text).toContain("notes__read_note (MCP server notes)");
    expect(text).toContain("agents_list");
  });

  it("deny rules remove MCP tools (FORBIDDEN to tools.invoke); an agent without the server has none of them", async () => {
    const listed = await t.rpc("tools.list", { sessionKey: "agent:reader:main" });
    const names = listed.result.tools.map((x: { name: string }) => x.name);
    expect(names).toContain("notes__read_note");
    expect(names).not.toContain("notes__write_note");
    expect(listed.result.removed).toContainEqual(
      expect.objectContaining({ name: "notes__write_note", by: "agent" }),
    );
    const write = await t.rpc("tools.invoke", {
      sessionKey: "agent:reader:main",
      tool: "notes__write_note",
      args: { name: "x", text: "y" },
    });
    expect(write.error?.code).toBe("FORBIDDEN");
    expect(write.error?.message).toContain("agents.list[reader].tools.deny");
    // the same server process serves both agents: the denied write did not reach it
    expect((await t.invoke("agent:reader:main", "notes__read_note", { name: "x" })).status).toBe("error");

    const plain = await t.rpc("tools.list", { sessionKey: "agent:plain:main" });
    expect(plain.result.tools.some((x: { name: string }) => x.name.startsWith("notes__"))).toBe(false);
    const forbidden = await t.rpc("tools.invoke", {
      sessionKey: "agent:plain:main",
      tool: "notes__read_note",
      args: { name: "todo" },
    });
    expect(forbidden.error?.code).toBe("FORBIDDEN");
  });

  it("arguments that break the server's schema are refused before the call, naming the field", async () => {
    const r = await t.rpc("tools.invoke", {
      sessionKey: "main",
      tool: "notes__read_note",
      args: { name: 3 },
    });
    expect(r.error?.code).toBe("INVALID_PARAMS");
    expect(r.error?.message).toContain("name must be string");
    const extra = await t.rpc("tools.invoke", {
      sessionKey: "main",
      tool: "notes__read_note",
      args: { name: "a", evil: true },
    });
    expect(extra.error?.code).toBe("INVALID_PARAMS");
    expect(extra.error?.message).toContain("additional properties");
    // through a turn: the model gets the error as the tool's result, the turn goes on
    const turn = await t.rpc("chat.send", {
      sessionKey: "agent:main:badargs",
      message: "half-write n",
      timeoutSeconds: 20,
    });
    expect(turn.result.status).toBe("ok");
    expect(turn.result.reply).toContain("must have required property 'text'");
  });

  it("images go into the media store as media parts (typed by their bytes); embedded resources are text", async () => {
    const snap = await t.invoke("main", "notes__snapshot", {});
    const hex = createHash("sha256").update(FAKE_PNG).digest("hex");
    expect(snap).toEqual({
      status: "ok",
      text: `the notes board:\n[image image/png, 70 B: sha256:${hex}]`,
      parts: [{ type: "image", mediaId: `sha256:${hex}`, mimeType: "image/png", bytes: FAKE_PNG.length }],
    });
    expect(await t.app.services.media?.stat(`sha256:${hex}`)).toMatchObject({
      mimeType: "image/png",
      bytes: 70,
    });
    await t.invoke("main", "notes__write_note", { name: "r", text: "resource body" });
    const res = await t.invoke("main", "notes__note_resource", { name: "r" });
    expect(res.text).toBe("[resource note://r (text/plain)]\nresource body");
  });

  it("a server that lies about its schema, sends 10 MB, or malformed content: each a clear tool error or a cut", async () => {
    const lying = await t.invoke("main", "notes__lying_schema", { count: "5" });
    expect(lying).toEqual({ status: "error", error: "count must be a number, despite what the schema says" });
    const out = await t.invoke("main", "notes__lying_output", {});
    expect(out.status).toBe("error");
    expect(out.error).toContain("does not match the tool's output schema");

    const huge = await t.invoke("main", "notes__huge_text", {});
    expect(huge.status).toBe("ok");
    expect(huge.truncated).toBe(true);
    expect(huge.text.length).toBeLessThan(50_200);
    expect(huge.text).toContain(
      `[truncated: the result had ${HUGE_TEXT_CHARS} characters; the first 50000 are shown]`,
    );

    const bad = await t.invoke("main", "notes__malformed", {});
    expect(bad.status).toBe("error");
    expect(bad.error).toContain("malformed (content: ");
  });

  it("a server that never answers is a tool error after its timeout; it still serves the next call", async () => {
    const started = Date.now();
    const r = await t.invoke("main", "notes__hang", {});
    expect(r).toEqual({ status: "error", error: 'MCP server "notes" did not answer hang within 2 s' });
    expect(Date.now() - started).toBeLessThan(4000);
    expect((await t.invoke("main", "notes__whoami", {})).status).toBe("ok");
  });

  it("a server that exits mid-call: a tool error, then it is restarted (new pid) and serves again", async () => {
    const before = pidOf((await t.invoke("main", "notes__whoami", {})).text);
    const r = await t.invoke("main", "notes__crash", {});
    expect(r.status).toBe("error");
    expect(r.error).toContain("ended during the call (exited with code 3)");
    expect(await gone(before)).toBe(true);
    const after = await t.invoke("main", "notes__whoami", {});
    expect(after.status).toBe("ok");
    expect(pidOf(after.text)).not.toBe(before);
    expect(pidOf(after.text)).toBe(t.app.tools.mcp?.connection("notes")?.pid);
  });

  it("100 parallel sessions calling tools share one server process", async () => {
    const runs = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        t.rpc("chat.send", { sessionKey: `agent:main:p${i}`, message: "who", timeoutSeconds: 30 }),
      ),
    );
    const pids = new Set(runs.map((r) => pidOf(r.result.reply)));
    expect(runs.every((r) => r.result.status === "ok")).toBe(true);
    expect(pids.size).toBe(1);
    expect([...pids][0]).toBe(t.app.tools.mcp?.connection("notes")?.pid);
  });

  it("the server's stderr goes to the log at debug, never into a prompt", async () => {
    const line = logs.find((l) => l.includes("STDERR-SECRET-LINE"));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ level: 20, mcpServer: "notes" });
    const h = await t.rpc("sessions.history", { sessionKey: "main", limit: 50, includeTools: true });
    expect(JSON.stringify(h.result)).not.toContain("STDERR-SECRET-LINE");
  });
});

describe("stopping the gateway", () => {
  it("stops each stdio server with its whole process group", async () => {
    const t = await startTestApp({
      mcp: { servers: { notes: mcpStdioServer() } },
      agents: { list: [{ id: "main", mcp: ["notes"] }] },
    });
    let server = 0;
    let child = 0;
    try {
      server = pidOf((await t.invoke("main", "notes__whoami", {})).text);
      child = Number(/child=(\d+)/.exec((await t.invoke("main", "notes__spawn_child", {})).text)?.[1]);
      expect(pidAlive(server) && pidAlive(child)).toBe(true);
    } finally {
      await t.stop();
    }
    expect(await gone(server)).toBe(true);
    expect(await gone(child)).toBe(true);
  });
});

describe("an MCP server over Streamable HTTP", () => {
  let fake: McpHttpFake;
  let t: TestApp;
  beforeAll(async () => {
    fake = await startMcpHttpFake();
    t = await startTestApp({
      ...scripted("remote"),
      mcp: {
        servers: {
          remote: { url: fake.url, headers: { Authorization: "Bearer remote-t0ken" }, timeoutSeconds: 2 },
        },
      },
      agents: { list: [{ id: "main", mcp: ["remote"] }] },
      tools: { approvals: { default: "allow" as const } },
    });
  });
  afterAll(async () => {
    await t?.stop();
    await fake?.close();
  });

  it("a real turn calls remote__write_note; the headers are sent; tools.list shows the server", async () => {
    const r = await t.rpc("chat.send", {
      sessionKey: "main",
      message: "write a over http",
      timeoutSeconds: 20,
    });
    expect(r.result.reply).toContain("saved a");
    expect(fake.notes.get("a")).toBe("over http");
    expect(fake.headers.every((h) => h.authorization === "Bearer remote-t0ken")).toBe(true);
    const listed = await t.rpc("tools.list", { sessionKey: "main" });
    expect(listed.result.tools.find((x: { name: string }) => x.name === "remote__read_note")?.server).toBe(
      "remote",
    );
    expect(await t.invoke("main", "remote__read_note", { name: "a" })).toEqual({
      status: "ok",
      text: "over http",
    });
  });

  it("a hanging call and a dropped connection are tool errors in bounded time", async () => {
    const started = Date.now();
    expect((await t.invoke("main", "remote__hang", {})).error).toContain("did not answer hang within 2 s");
    const crash = await t.invoke("main", "remote__crash", {});
    expect(crash.status).toBe("error");
    expect(Date.now() - started).toBeLessThan(6000);
    // the next call connects afresh (the dropped connection may still sit in fetch's pool)
    expect((await t.invoke("main", "remote__whoami", {})).status).toBe("ok");
  });

  it("a 10 MB answer is cut for the model", async () => {
    const huge = await t.invoke("main", "remote__huge_text", {});
    expect(huge.truncated).toBe(true);
    expect(huge.text.length).toBeLessThan(50_200);
  });
});

describe("mcp config", () => {
  it("an agent naming an unknown server is a start-up error naming the path", () => {
    expect(() => parseConfig({ agents: { list: [{ id: "main", mcp: ["nope"] }] } })).toThrow(
      /agents\.list\.0\.mcp\.0: MCP server "nope" is not configured \(mcp\.servers\)/,
    );
  });

  it("a server is a command or a url, not both; names cannot hold __", () => {
    expect(() =>
      parseConfig({ mcp: { servers: { a: { command: "x", url: "http://127.0.0.1/mcp" } } } }),
    ).toThrow(/mcp\.servers\.a\.url: set either command/);
    expect(() => parseConfig({ mcp: { servers: { a__b: { command: "x" } } } })).toThrow(/mcp\.servers/);
    expect(parseConfig({ mcp: { servers: { files: { command: "npx" } } } }).mcp.servers.files).toMatchObject({
      args: [],
      env: {},
      cwd: null,
      timeoutSeconds: 60,
      startTimeoutSeconds: 60,
      maxResultChars: 50_000,
    });
  });
});

describeRedis("MCP servers on bullmq", () => {
  it("run in the worker that runs the turn, not in the gateway", async () => {
    const prefix = randomPrefix("mcp");
    const shared = {
      ...scripted("notes"),
      storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
      queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix, runTurns: false },
      mcp: { servers: { notes: mcpStdioServer() } },
      agents: { list: [{ id: "main", mcp: ["notes"] }] },
      tools: { approvals: { default: "allow" as const } },
    };
    const gateway = await startTestApp(shared);
    const worker = await startTestWorker({ ...shared, queue: { ...shared.queue, runTurns: true } });
    try {
      const r = await gateway.rpc("chat.send", {
        sessionKey: "agent:main:bull",
        message: "who",
        timeoutSeconds: 20,
      });
      expect(r.result.status).toBe("ok");
      const pid = worker.app.tools.mcp?.connection("notes")?.pid;
      expect(pid).toBeGreaterThan(0);
      expect(pidOf(r.result.reply)).toBe(pid);
      expect(gateway.app.tools.mcp?.connection("notes")).toBeUndefined();
    } finally {
      await worker.stop();
      await gateway.stop();
      await dropPrefix(prefix);
    }
  });
});
