import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  createScriptedProvider,
  DEMO_MARKER,
  type ScriptedProviderConfig,
} from "../../../../src/agent/providers/scripted.js";
import { SwitchboardError } from "../../../../src/errors.js";
import { silentLogger } from "../../../../src/log.js";
import type { ModelMessage, ModelRequest } from "../../../../src/services/models.js";
import { tempDir } from "../../../helpers.js";

function cfg(over: Partial<ScriptedProviderConfig> = {}): ScriptedProviderConfig {
  return { kind: "scripted", models: {}, timeoutMs: 1000, maxRetries: 0, ...over };
}

function ask(content: string, over: Partial<ModelRequest> = {}): ModelRequest {
  return { model: "demo", system: "sys", messages: [{ role: "user", content }], tools: [], ...over };
}

let tmp: { dir: string; cleanup: () => void };
beforeEach(() => {
  tmp = tempDir("sb-scripted-");
});
afterEach(() => tmp.cleanup());

describe("scripted provider: rules", () => {
  it("loads a JSON5 rules file and substitutes regex groups in replies", async () => {
    const file = path.join(tmp.dir, "script.json5");
    writeFileSync(
      file,
      `// comments are fine in JSON5
      { rules: [
        { match: "^my name is (\\\\w+) (\\\\w+)$", reply: "Hello $1 (family $2), you wrote: {{message}}" },
        { match: { contains: "ping" }, reply: "pong" },
        { match: { exact: "skip me" }, reply: "REPLY_SKIP" },
      ] }`,
    );
    const p = createScriptedProvider("s", cfg({ script: "script.json5" }), silentLogger(), {
      scriptPath: file,
    });
    expect((await p.complete(ask("My name is Ada Lovelace"))).text).toBe(
      "Hello Ada (family Lovelace), you wrote: My name is Ada Lovelace",
    );
    expect((await p.complete(ask("say PING please"))).text).toBe("pong");
    expect((await p.complete(ask("  skip me "))).text).toBe("REPLY_SKIP");
    expect((await p.complete(ask("skip me too"))).text).toBe("You said: skip me too");
  });

  it("calls tools with templated args, then answers with `afterTools` once results are back", async () => {
    const p = createScriptedProvider(
      "s",
      cfg({
        rules: [
          {
            match: "^look up (\\S+) (\\d+)$",
            reply: "checking",
            toolCalls: [
              { name: "sessions_history", args: { sessionKey: "$1", limit: 5, tags: ["$2"] } },
              { name: "session_status", args: {} },
            ],
            afterTools: "Found for $1: {{lastToolResult}}",
          },
        ],
      }),
      silentLogger(),
    );
    const first = await p.complete(ask("look up agent:main:main 42"));
    expect(first.stopReason).toBe("tool_calls");
    expect(first.text).toBe("checking");
    expect(first.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ["sessions_history", { sessionKey: "agent:main:main", limit: 5, tags: ["42"] }],
      ["session_status", {}],
    ]);
    expect(new Set(first.toolCalls.map((c) => c.id)).size).toBe(2);

    const messages: ModelMessage[] = [
      { role: "user", content: "look up agent:main:main 42" },
      { role: "assistant", content: first.text, toolCalls: first.toolCalls },
      {
        role: "tool",
        toolCallId: first.toolCalls[0]!.id,
        name: "sessions_history",
        content: '{"messages":[]}',
      },
      {
        role: "tool",
        toolCallId: first.toolCalls[1]!.id,
        name: "session_status",
        content: '{"statusText":"ok"}',
      },
    ];
    const second = await p.complete(ask("", { messages }));
    expect(second).toMatchObject({
      stopReason: "stop",
      toolCalls: [],
      text: 'Found for agent:main:main: {"statusText":"ok"}',
    });
  });

  it("accepts `then` as an alias of `afterTools` in rule files", async () => {
    const file = path.join(tmp.dir, "alias.json5");
    writeFileSync(
      file,
      `[{ match: "^fetch$", toolCalls: [{ name: "agents_list" }], then: "got {{lastToolResult}}" }]`,
    );
    const p = createScriptedProvider("s", cfg({ script: "alias.json5" }), silentLogger(), {
      scriptPath: file,
    });
    const first = await p.complete(ask("fetch"));
    expect(JSON.parse(first.toolCalls[0]!.arguments)).toEqual({});
    const r = await p.complete(
      ask("", {
        messages: [
          { role: "user", content: "fetch" },
          { role: "assistant", content: "", toolCalls: first.toolCalls },
          { role: "tool", toolCallId: first.toolCalls[0]!.id, name: "agents_list", content: "[]" },
        ],
      }),
    );
    expect(r.text).toBe("got []");
  });

  it("summarises tool results when a rule has no `afterTools`", async () => {
    const p = createScriptedProvider(
      "s",
      cfg({ rules: [{ match: "go", toolCalls: [{ name: "agents_list", args: {} }] }] }),
      silentLogger(),
    );
    const r = await p.complete(
      ask("", {
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "agents_list", arguments: "{}" }] },
          { role: "tool", toolCallId: "c1", name: "agents_list", content: '{"agents":[]}' },
        ],
      }),
    );
    expect(r.text).toBe('Tool results:\nagents_list: {"agents":[]}');
    expect(r.stopReason).toBe("stop");
  });

  it("rejects bad rules with the config path of the field", () => {
    expect(() =>
      createScriptedProvider(
        "s",
        cfg({
          rules: [
            { match: "ok", reply: "x" },
            { match: "(", reply: "y" },
          ],
        }),
        silentLogger(),
      ),
    ).toThrow(/models\.providers\.s\.rules\.1\.match: invalid regular expression/);
    expect(() => createScriptedProvider("s", cfg({ rules: [{ match: "x" }] }), silentLogger())).toThrow(
      /models\.providers\.s\.rules\.0.*reply.*toolCalls/,
    );
    const err = (() => {
      try {
        createScriptedProvider("s", cfg({ rules: [{ match: "x", reply: 5 }] }), silentLogger());
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("CONFIG");
    expect((err as Error).message).toContain("models.providers.s.rules.0.reply");
    const missing = path.join(tmp.dir, "nope.json5");
    expect(() =>
      createScriptedProvider("s", cfg({ script: "nope.json5" }), silentLogger(), { scriptPath: missing }),
    ).toThrow(/models\.providers\.s\.script: cannot read .*nope\.json5: ENOENT/);
  });

  it("counts usage at about four characters per token and streams the reply as one delta", async () => {
    const p = createScriptedProvider(
      "s",
      cfg({ rules: [{ match: "x", reply: "12345678" }] }),
      silentLogger(),
    );
    const deltas: string[] = [];
    const r = await p.complete(ask("x".repeat(16), { system: "abcd", onTextDelta: (d) => deltas.push(d) }));
    expect(r.usage).toEqual({ input: 5, output: 2 });
    expect(deltas).toEqual(["12345678"]);
  });

  it("waits a rule's delayMs and gives up with the caller's abort reason", async () => {
    const p = createScriptedProvider(
      "s",
      cfg({ rules: [{ match: "slow", reply: "done", delayMs: 60_000 }] }),
      silentLogger(),
    );
    const controller = new AbortController();
    const pending = p.complete(ask("slow", { signal: controller.signal }));
    const reason = new Error("cancelled");
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });
});

describe("scripted provider: built-in demo rules", () => {
  const demo = () => createScriptedProvider("scripted", cfg(), silentLogger(), { demo: true });

  it("says it is the scripted demo model in every final reply", async () => {
    const r = await demo().complete(ask("hello?"));
    expect(r.text).toBe(`You said: hello?\n\n${DEMO_MARKER}`);
    expect(DEMO_MARKER).toContain("models.default");
    const quiet = await createScriptedProvider("scripted", cfg(), silentLogger()).complete(ask("hello?"));
    expect(quiet.text).toBe("You said: hello?");
  });

  it("help lists the commands", async () => {
    const r = await demo().complete(ask("help"));
    for (const cmd of [
      "spawn <task>",
      "list sessions",
      "send <sessionKey> <text>",
      "history",
      "status",
      "agents",
      "yield",
    ]) {
      expect(r.text).toContain(cmd);
    }
    expect(r.text).toContain(DEMO_MARKER);
  });

  it.each([
    ["spawn research the weather", "sessions_spawn", { task: "research the weather" }],
    ["list sessions", "sessions_list", {}],
    [
      "send agent:main:main hi there",
      "sessions_send",
      { sessionKey: "agent:main:main", message: "hi there", timeoutSeconds: 0 },
    ],
    ["history agent:main:main", "sessions_history", { sessionKey: "agent:main:main" }],
    ["status", "session_status", {}],
    ["agents", "agents_list", {}],
    ["yield", "sessions_yield", { reason: "demo: waiting for sub-agents" }],
  ])("%s → %s", async (input, tool, args) => {
    const p = demo();
    const r = await p.complete(ask(input));
    expect(r.stopReason).toBe("tool_calls");
    expect(r.toolCalls).toHaveLength(1);
    expect(r.toolCalls[0]!.name).toBe(tool);
    expect(JSON.parse(r.toolCalls[0]!.arguments)).toEqual(args);
    const after = await p.complete(
      ask("", {
        messages: [
          { role: "user", content: input },
          { role: "assistant", content: r.text, toolCalls: r.toolCalls },
          { role: "tool", toolCallId: r.toolCalls[0]!.id, name: tool, content: '{"status":"ok"}' },
        ],
      }),
    );
    expect(after.stopReason).toBe("stop");
    expect(after.text).toContain('{"status":"ok"}');
    expect(after.text).toContain(DEMO_MARKER);
  });

  it("keeps protocol tokens exact even in demo mode", async () => {
    const p = createScriptedProvider(
      "s",
      cfg({ rules: [{ match: "done", reply: "ANNOUNCE_SKIP" }] }),
      silentLogger(),
      {
        demo: true,
      },
    );
    expect((await p.complete(ask("done"))).text).toBe("ANNOUNCE_SKIP");
  });
});
