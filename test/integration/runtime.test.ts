import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoHandler, type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";

/** The agent runtime end to end with the real openai provider against the loopback fake. */

let fake: OpenAIFake;

beforeAll(async () => {
  fake = await startOpenAIFake();
});
afterAll(async () => {
  await fake.close();
});

function modelConfig(extra: Record<string, unknown> = {}) {
  return {
    models: {
      default: "fake/m1",
      providers: {
        fake: {
          kind: "openai" as const,
          baseUrl: fake.url,
          apiKey: "sk-test-1234567890abcdef",
          timeoutMs: 2000,
          maxRetries: 1,
          models: { m1: { price: { inputPerMTok: 1, outputPerMTok: 2 } } },
        },
      },
      ...extra,
    },
  };
}

describe("a turn with a tool call", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(modelConfig());
  });
  afterAll(async () => t.stop());

  it("chat.send → tool call → tool result → final reply; every message in the transcript with usage", async () => {
    fake.enqueue(
      {
        text: "let me look",
        toolCalls: [{ name: "agents_list", arguments: {} }],
        usage: { prompt: 100, completion: 10 },
      },
      (req) => {
        const last = req.body.messages?.at(-1);
        return {
          text: `agents: ${String(last?.content).includes('"main"') ? "main" : "?"}`,
          usage: { prompt: 150, completion: 5 },
        };
      },
    );
    const before = fake.chatRequests().length;
    const r = await t.rpc("chat.send", {
      sessionKey: "main",
      message: "which agents exist?",
      timeoutSeconds: 20,
    });
    expect(r.result).toMatchObject({ status: "ok", reply: "agents: main" });

    const reqs = fake.chatRequests().slice(before);
    expect(reqs).toHaveLength(2);
    // The model saw the tool's JSON schema, and the system prompt names the session.
    expect(reqs[0]?.body.tools?.map((x) => x.function.name)).toContain("agents_list");
    expect(String(reqs[0]?.body.messages?.[0]?.content)).toContain("agent:main:main");
    expect(reqs[0]?.headers.authorization).toBe("Bearer sk-test-1234567890abcdef");
    // The second call carries the tool call and its result.
    const roles = reqs[1]?.body.messages?.map((m) => m.role);
    expect(roles).toEqual(["system", "user", "assistant", "tool"]);

    const hist = await t.rpc("sessions.history", { sessionKey: "main", includeTools: true });
    expect(hist.result.messages.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "toolCall",
      "toolResult",
      "assistant",
    ]);

    const entry = await t.app.services.store.sessions.get("agent:main:main");
    expect(entry).toMatchObject({
      lastModel: "fake/m1",
      inputTokens: 250,
      outputTokens: 15,
      // One definition: input + output (the last call's context use is contextUsedTokens).
      totalTokens: 265,
      contextUsedTokens: 155,
    });
    expect(entry?.costUsd).toBeCloseTo((250 * 1 + 15 * 2) / 1e6, 12);
    const run = await t.rpc("runs.get", { runId: r.result.runId });
    expect(run.result.usage).toMatchObject({ input: 250, output: 15 });
    const lines = await t.app.services.store.transcripts.readTail(
      { agentId: "main", sessionId: entry!.sessionId },
      { limit: 10, includeTools: true },
    );
    expect(lines.every((l) => l.runId === r.result.runId)).toBe(true);
    expect(lines.find((l) => l.role === "assistant")?.usage?.input).toBe(100);
  });

  it("malformed tool arguments become an error tool result the model can read", async () => {
    fake.enqueue({ toolCalls: [{ name: "agents_list", arguments: "{not json" }] }, (req) => ({
      text: `saw: ${String(req.body.messages?.at(-1)?.content)}`,
    }));
    const r = await t.rpc("chat.send", {
      sessionKey: "agent:main:bad-args",
      message: "go",
      timeoutSeconds: 20,
    });
    expect(r.result.status).toBe("ok");
    expect(r.result.reply).toContain("not valid JSON");
  });

  it("schema-invalid and unknown tools are error results, not crashes", async () => {
    fake.enqueue(
      {
        toolCalls: [
          { name: "sessions_history", arguments: { limit: "ten" } },
          { name: "no_such_tool", arguments: {} },
        ],
      },
      (req) => {
        const tools = (req.body.messages ?? [])
          .filter((m) => m.role === "tool")
          .map((m) => String(m.content));
        return { text: tools.join(" | ") };
      },
    );
    const r = await t.rpc("chat.send", {
      sessionKey: "agent:main:bad-schema",
      message: "go",
      timeoutSeconds: 20,
    });
    expect(r.result.status).toBe("ok");
    expect(r.result.reply).toContain("sessionKey");
    expect(r.result.reply).toContain("no_such_tool");
  });

  it("a model that fails or times out ends the run with a clear error and the gateway keeps serving", async () => {
    // The failover chain owns retries (provider maxRetries is for direct calls): a 500 gets one
    // quick retry on the same model, a timeout moves on at once (no model left here).
    fake.enqueue({ status: 500, error: "boom" }, { status: 500, error: "boom" });
    const r1 = await t.rpc("chat.send", { sessionKey: "agent:main:err", message: "x", timeoutSeconds: 20 });
    expect(r1.result.status).toBe("error");
    expect(r1.result.error).toMatch(/500|boom|unavailable/i);

    fake.enqueue({ delayMs: 5000, text: "late" });
    const r2 = await t.rpc("chat.send", { sessionKey: "agent:main:slow", message: "x", timeoutSeconds: 30 });
    expect(r2.result.status).toBe("error");
    expect(r2.result.error).toMatch(/time/i);

    const ok = await t.rpc("chat.send", {
      sessionKey: "agent:main:err",
      message: "still there?",
      timeoutSeconds: 20,
    });
    expect(ok.result).toMatchObject({ status: "ok", reply: "still there?" });
  });
});

describe("model selection", () => {
  it("an unknown provider is a config error at start naming the path, never a silent fallback", async () => {
    await expect(
      startTestApp({
        ...modelConfig(),
        agents: { list: [{ id: "main" }, { id: "ghost", model: "nowhere/x" }] },
      }),
    ).rejects.toThrow(/config: agents\.list\.1\.model: unknown model provider "nowhere"/);
  });

  it("the demo model says it is scripted when nothing is configured", async () => {
    const t = await startTestApp();
    try {
      const r = await t.rpc("chat.send", { sessionKey: "main", message: "help", timeoutSeconds: 20 });
      expect(r.result.status).toBe("ok");
      expect(r.result.reply.toLowerCase()).toContain("scripted");
      expect(r.result.reply).toContain("spawn");
    } finally {
      await t.stop();
    }
  });
});

describe("a turn re-run after a crash (attempt 2)", () => {
  it("appends no second copy of any line and does not spawn the sub-agent again", async () => {
    const t = await startTestApp(modelConfig());
    try {
      // by request, not by queue: the sub-agent's own turn calls the model concurrently
      fake.setDefault((req) => {
        const system = String(req.body.messages?.[0]?.content);
        if (!system.includes("agent:main:main") || system.includes("subagent")) return { text: "child done" };
        const last = req.body.messages?.at(-1);
        if (last?.role === "tool") return { text: "spawned it" };
        return {
          text: "",
          toolCalls: [{ name: "sessions_spawn", arguments: { task: "dig", label: "digger" } }],
        };
      });
      const r = await t.rpc("chat.send", { sessionKey: "main", message: "spawn one", timeoutSeconds: 20 });
      expect(r.result).toMatchObject({ status: "ok", reply: "spawned it" });
      const entry = (await t.app.services.store.sessions.get("agent:main:main"))!;
      const ref = { agentId: "main", sessionId: entry.sessionId };
      const before = await t.app.services.store.transcripts.readTail(ref, { limit: 50, includeTools: true });
      const children = async () =>
        (await t.app.services.store.sessions.list({ spawnedBy: "agent:main:main" })).length;
      expect(await children()).toBe(1);

      // the same job again, as the pipeline hands it over after a crash before its `done` record
      const again = await t.app.runtime.runTurn(
        {
          runId: r.result.runId,
          sessionKey: "agent:main:main",
          agentId: "main",
          messages: [{ runId: r.result.runId, text: "spawn one" }],
          deliver: false,
          origin: "operator",
          timeoutMs: 0,
          attempt: 2,
        },
        { signal: new AbortController().signal, stillOwner: async () => true, takeSteering: () => [] },
      );
      expect(again).toMatchObject({ status: "ok", reply: "spawned it" });
      const after = await t.app.services.store.transcripts.readTail(ref, { limit: 50, includeTools: true });
      expect(after.map((m) => m.id)).toEqual(before.map((m) => m.id));
      expect(new Set(after.map((m) => m.id)).size).toBe(after.length);
      expect(after.map((m) => m.role)).toEqual(["user", "toolCall", "toolResult", "assistant"]);
      expect(await children()).toBe(1);
    } finally {
      fake.setDefault(echoHandler);
      await t.stop();
    }
  });
});

describe("lanes through the runtime", () => {
  it("50 messages to one session run one at a time, in order; 50 sessions run in parallel", async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    fake.setDefault((req) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      setTimeout(() => inFlight--, 15);
      const last = req.body.messages?.filter((m) => m.role === "user").at(-1);
      return { text: `re:${String(last?.content)}`, delayMs: 15 };
    });
    const t = await startTestApp({ ...modelConfig(), queue: { mode: "followup", concurrency: 8 } });
    try {
      const runs: string[] = [];
      for (let i = 0; i < 50; i++) {
        const r = await t.rpc("chat.send", {
          sessionKey: "agent:main:lane",
          message: `m${i}`,
          timeoutSeconds: 0,
        });
        runs.push(r.result.runId);
      }
      for (const id of runs)
        expect((await t.rpc("agent.wait", { runId: id, timeoutMs: 30_000 })).result.status).toBe("ok");
      const hist = await t.rpc("sessions.history", { sessionKey: "agent:main:lane", limit: 100 });
      const texts = hist.result.messages.map(
        (m: { role: string; content: string }) => `${m.role}:${m.content}`,
      );
      const expected = Array.from({ length: 50 }, (_, i) => [`user:m${i}`, `assistant:re:m${i}`]).flat();
      expect(texts).toEqual(expected);
      expect(maxInFlight).toBe(1);

      maxInFlight = 0;
      const many = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          t.rpc("chat.send", { sessionKey: `agent:main:p${i}`, message: "hi", timeoutSeconds: 0 }),
        ),
      );
      for (const r of many)
        expect((await t.rpc("agent.wait", { runId: r.result.runId, timeoutMs: 30_000 })).result.status).toBe(
          "ok",
        );
      expect(maxInFlight).toBeGreaterThan(1);
      expect(maxInFlight).toBeLessThanOrEqual(8);
    } finally {
      fake.setDefault(echoHandler);
      await t.stop();
    }
  });
});

describe("the end of a turn", () => {
  const scripted = {
    models: {
      default: "s/echo",
      providers: { s: { kind: "scripted" as const, rules: [{ match: "^(.*)$", reply: "re: $1" }] } },
    },
  };

  it("the session's patch goes out while the answer's append is still in flight (one round trip for both)", async () => {
    const t = await startTestApp(scripted);
    try {
      const { transcripts, sessions } = t.app.services.store;
      const order: string[] = [];
      let patchSent!: () => void;
      const patchSeen = new Promise<void>((r) => {
        patchSent = r;
      });
      const append = transcripts.append.bind(transcripts);
      transcripts.append = async (ref, m) => {
        const done = await append(ref, m);
        if (m.role === "assistant") {
          // held until the patch is sent (at most 2 s: a turn that waits for the append first goes on)
          await Promise.race([patchSeen, new Promise((r) => setTimeout(r, 2000))]);
          order.push("append done");
        }
        return done;
      };
      const patch = sessions.patch.bind(sessions);
      sessions.patch = (key, p) => {
        order.push("patch sent");
        patchSent();
        return patch(key, p);
      };
      const r = await t.rpc("chat.send", { sessionKey: "agent:main:end", message: "hi", timeoutSeconds: 20 });
      expect(r.result).toMatchObject({ status: "ok", reply: "re: hi" });
      expect(order).toEqual(["patch sent", "append done"]);
      const entry = await sessions.get("agent:main:end");
      expect(entry?.lastModel).toBe("s/echo");
    } finally {
      await t.stop();
    }
  });

  it("an answer whose append fails ends the run as an error naming the cause; the gateway keeps serving", async () => {
    const t = await startTestApp(scripted);
    try {
      const { transcripts } = t.app.services.store;
      const append = transcripts.append.bind(transcripts);
      let fail = true;
      transcripts.append = async (ref, m) => {
        if (m.role === "assistant" && fail) {
          fail = false;
          throw new Error("disk on fire");
        }
        return append(ref, m);
      };
      const r = await t.rpc("chat.send", { sessionKey: "agent:main:end2", message: "a", timeoutSeconds: 20 });
      expect(r.result).toMatchObject({ status: "error", error: expect.stringMatching(/disk on fire/) });
      const again = await t.rpc("chat.send", {
        sessionKey: "agent:main:end2",
        message: "b",
        timeoutSeconds: 20,
      });
      expect(again.result).toMatchObject({ status: "ok", reply: "re: b" });
    } finally {
      await t.stop();
    }
  });

  it("an answer whose append fails after the run was cancelled: the run ends aborted and the session says so", async () => {
    const t = await startTestApp(scripted);
    try {
      const { transcripts, sessions } = t.app.services.store;
      const append = transcripts.append.bind(transcripts);
      transcripts.append = async (ref, m) => {
        if (m.role === "assistant" && m.runId) {
          await t.app.services.pipeline.cancel(m.runId, "aborted");
          throw new Error("append interrupted");
        }
        return append(ref, m);
      };
      const r = await t.rpc("chat.send", { sessionKey: "agent:main:end3", message: "a", timeoutSeconds: 20 });
      expect(r.result).toMatchObject({ status: "error" });
      const run = await t.rpc<{ status: string }>("agent.wait", { runId: r.result.runId, timeoutMs: 1000 });
      expect(run.result?.status).toBe("aborted");
      expect((await sessions.get("agent:main:end3"))?.abortedLastRun).toBe(true);
    } finally {
      await t.stop();
    }
  });
});
