import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { statusCard } from "../../../src/policy/status-card.js";
import type { SessionEntry } from "../../../src/store/types.js";
import { startOpenAIFake } from "../../fakes/openai.js";
import { startTestApp, type TestApp } from "../../harness.js";
import { seedChild, seedSession } from "./seed-sessions.js";

/** session_status through tools.invoke: the card, the model override, visibility. */

const NOW = Date.UTC(2030, 0, 2, 3, 4, 5);

let t: TestApp;
let main: SessionEntry;
let child: SessionEntry;
let group: SessionEntry;
let ops: SessionEntry;

beforeAll(async () => {
  t = await startTestApp(
    {
      agents: { list: [{ id: "main", name: "Main" }, { id: "ops" }] },
      models: {
        default: "fake/m",
        // Never called: these tests run no turns.
        providers: {
          fake: {
            kind: "openai",
            baseUrl: "http://127.0.0.1:9/v1",
            models: { m: { contextTokens: 32_000 } },
          },
        },
        allowed: ["fake/good*", "fake/m"],
      },
      session: {
        sendPolicy: {
          rules: [{ match: { channel: "discord", chatType: "group" }, action: "deny" }],
          default: "allow",
        },
      },
      tools: { sessions: { visibility: "agent" } },
    },
    { now: () => NOW },
  );
  main = await seedSession(t, "agent:main:main", {
    updatedAt: NOW - 5 * 60_000,
    createdAt: NOW - 3_600_000,
    channel: "telegram",
    deliveryContext: { channel: "telegram", to: "4242", accountId: "default", threadId: "7" },
    label: "home",
    inputTokens: 1234,
    outputTokens: 567,
    // A stale total from before the one definition: ignored, total is always input + output.
    totalTokens: 120,
    contextUsedTokens: 6400,
  });
  child = await seedChild(t, main, { label: "researcher", updatedAt: NOW, createdAt: NOW });
  group = await seedSession(t, "agent:main:discord:group:g1", { updatedAt: NOW, createdAt: NOW });
  ops = await seedSession(t, "agent:ops:main", { updatedAt: NOW, createdAt: NOW });
});

afterAll(async () => {
  await t?.stop();
});

const status = (key: string, args: Record<string, unknown> = {}) => t.invoke(key, "session_status", args);
const stored = async (key: string) => (await t.app.services.store.sessions.get(key)) as SessionEntry;

describe("session_status: the card", () => {
  it("defaults to the caller and reports model, tokens, queue, send policy and delivery", async () => {
    const s = await status("agent:main:main");
    expect(s).toMatchObject({
      status: "ok",
      sessionKey: "main",
      sessionId: main.sessionId,
      model: "fake/m",
      changedModel: false,
      tokens: { input: 1234, output: 567, total: 1801, contextUsed: 6400, context: 32_000 },
      updatedAt: NOW - 5 * 60_000,
      queue: { pending: 0, active: false },
      sendPolicy: "allow",
      label: "home",
      spawnDepth: 0,
      deliveryContext: { channel: "telegram", to: "4242", accountId: "default", threadId: "7" },
    });
    expect(s.modelOverride).toBeUndefined();
    const card: string = s.statusText;
    expect(card).toContain("Session: agent:main:main (main, telegram)");
    expect(card).toContain("Model: fake/m");
    expect(card).toContain("Tokens: 1.8k (1.2k in / 567 out)");
    expect(card).toContain("Context: 6.4k / 32k (20%)");
    expect(card).toContain("Queue: idle, 0 pending");
    expect(card).toContain("Send policy: allow (no rule matched");
    expect(card).toContain("Label: home");
    expect(card).toContain("Delivery: telegram → 4242 (account default) thread 7");
    expect(card).toContain("(5m ago)");
    // The card the /status owner command answers with is the same text.
    expect(await statusCard(t.app.services, await stored(main.key))).toBe(card);
    expect(await status("agent:main:main", { sessionKey: "current" })).toEqual(s);
  });

  it("shows lineage and the send policy verdict of other visible sessions", async () => {
    const c = await status("agent:main:main", { sessionKey: child.key });
    expect(c).toMatchObject({ spawnedBy: "main", spawnDepth: 1, label: "researcher", sessionKey: child.key });
    expect(c.statusText).toContain("Lineage: spawned by agent:main:main (depth 1)");
    expect(c.statusText).toContain("Delivery: none");
    const g = await status("agent:main:main", { sessionKey: "AGENT:MAIN:DISCORD:GROUP:G1 " });
    expect(g).toMatchObject({
      sendPolicy: "deny",
      sendPolicyReason: "session.sendPolicy.rules[0] (deny) matched",
    });
    expect(g.statusText).toContain("Send policy: deny (session.sendPolicy.rules[0] (deny) matched)");
    await t.app.services.store.sessions.patch(group.key, { sendPolicy: "allow" });
    const o = await status("main", { sessionKey: group.sessionId });
    expect(o).toMatchObject({ sendPolicy: "allow", sendPolicyOverride: "allow" });
    expect(o.statusText).toContain("Send policy: allow (session override)");
  });

  it("total tokens has one definition: input + output, in the row as in the status", async () => {
    const s = await status("agent:main:main");
    expect(s.tokens.total).toBe(s.tokens.input + s.tokens.output);
    const rows = await t.invoke("agent:main:main", "sessions_list", {});
    expect(rows.sessions.find((r: { key: string }) => r.key === "main")?.totalTokens).toBe(1801);
  });

  it("reports linked background work: running and recent children; a child names its parent and depth", async () => {
    const parent = await seedSession(t, "agent:main:telegram:direct:linked", {
      updatedAt: NOW,
      createdAt: NOW,
    });
    const mk = async (label: string, status: "running" | "ok" | "error", endedAgoMs?: number) => {
      const runId = `run-${label}`;
      const c = await seedChild(t, parent, {
        label,
        updatedAt: NOW,
        createdAt: NOW,
        subagent: {
          task: label,
          runId,
          mode: "run",
          cleanup: "keep",
          runTimeoutSeconds: 0,
          sandboxed: false,
        },
      });
      await t.app.services.store.runs.put({
        runId,
        sessionKey: c.key,
        agentId: "main",
        status,
        createdAt: NOW - 70_000,
        startedAt: NOW - 60_000,
        ...(endedAgoMs !== undefined ? { endedAt: NOW - endedAgoMs } : {}),
      });
      return c;
    };
    const busy = await mk("busy", "running");
    await mk("finished", "ok", 10_000);
    await mk("ancient", "error", 3 * 3_600_000);
    const s = await status("agent:main:main", { sessionKey: parent.key });
    const byLabel = Object.fromEntries(s.children.map((c: { label: string }) => [c.label, c]));
    expect(Object.keys(byLabel).sort()).toEqual(["busy", "finished"]);
    expect(byLabel.busy).toMatchObject({
      sessionKey: busy.key,
      status: "running",
      runtimeMs: 60_000,
      runtime: "1m00s",
    });
    expect(byLabel.finished).toMatchObject({ status: "ok", runtimeMs: 50_000 });
    expect(s.statusText).toContain("Sub-agents: 1 running, 1 recent");
    expect(s.statusText).toContain("busy (running, 1m00s)");
    const c = await status("agent:main:main", { sessionKey: busy.key });
    expect(c).toMatchObject({ parent: parent.key, depth: 1, children: [] });
  });

  it("unknown is an error, invisible is forbidden, reserved is an error", async () => {
    expect(await status("main", { sessionKey: "agent:main:slack:channel:none" })).toMatchObject({
      status: "error",
    });
    expect(await status("main", { sessionKey: "00000000-0000-4000-8000-000000000000" })).toMatchObject({
      status: "error",
      error: expect.stringContaining("sessions_list"),
    });
    const f = await status("main", { sessionKey: ops.key });
    expect(f).toMatchObject({
      status: "forbidden",
      error: expect.stringContaining("tools.sessions.visibility"),
    });
    expect(f.statusText).toBeUndefined();
    expect(await status("main", { sessionKey: "global" })).toMatchObject({ status: "error" });
  });

  it("schema violations are INVALID_PARAMS", async () => {
    for (const args of [{ sessionKey: "" }, { sessionKey: "main", extra: 1 }, { model: 5 }]) {
      await expect(status("main", args)).rejects.toMatchObject({ code: "INVALID_PARAMS" });
    }
  });
});

describe("session_status: model override", () => {
  it("sets an allowed model, reports changedModel, and `default` clears it", async () => {
    const set = await status("main", { model: "fake/good-1" });
    expect(set).toMatchObject({
      status: "ok",
      changedModel: true,
      model: "fake/good-1",
      modelOverride: "fake/good-1",
    });
    expect(set.statusText).toContain("Model: fake/good-1 (session override)");
    expect((await stored(main.key)).model).toBe("fake/good-1");
    expect(await status("main", { model: "fake/good-1" })).toMatchObject({ changedModel: false });

    const cleared = await status("main", { model: " Default " });
    expect(cleared).toMatchObject({ status: "ok", changedModel: true, model: "fake/m" });
    expect(cleared.modelOverride).toBeUndefined();
    expect((await stored(main.key)).model).toBeUndefined();
    expect(await status("main", { model: "default" })).toMatchObject({ changedModel: false });
  });

  it("refuses models that do not resolve or are not allowed, changing nothing", async () => {
    await status("main", { sessionKey: child.key, model: "fake/good-2" });
    for (const [model, text] of [
      ["nope/x", "unknown model provider"],
      ["fake/other", "models.allowed"],
      ["gpt4", "<provider>/<model>"],
    ] as const) {
      const r = await status("main", { sessionKey: child.key, model });
      expect(r).toMatchObject({ status: "error", changedModel: false });
      expect(r.error).toContain(text);
      expect((await stored(child.key)).model).toBe("fake/good-2");
    }
  });

  it("cannot change an invisible session's model", async () => {
    const r = await status("main", { sessionKey: ops.key, model: "fake/good-3" });
    expect(r.status).toBe("forbidden");
    expect((await stored(ops.key)).model).toBeUndefined();
  });
});

describe("session_status: queue", () => {
  it("shows the running turn and the messages waiting behind it", async () => {
    const fake = await startOpenAIFake();
    // The first turn hangs until it is cancelled; later ones echo.
    fake.enqueue({ text: "never", delayMs: 600_000 });
    const app = await startTestApp({
      models: { default: "fake/m", providers: { fake: { kind: "openai", baseUrl: fake.url, apiKey: "k" } } },
    });
    try {
      const first = await app.rpc("chat.send", { sessionKey: "main", message: "one", timeoutSeconds: 0 });
      await fake.waitForRequests(1);
      await app.rpc("chat.send", { sessionKey: "main", message: "two", timeoutSeconds: 0 });
      const s = await app.invoke("main", "session_status");
      expect(s.queue).toEqual({ pending: 1, active: true, activeRunId: first.result.runId });
      expect(s.statusText).toContain(`Queue: running ${first.result.runId}, 1 pending`);
      await app.app.services.pipeline.cancel(first.result.runId, "aborted");
    } finally {
      await app.stop();
      await fake.close();
    }
  });
});
