import { createHash, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type App, createApp } from "../../../src/app/index.js";
import type { ChannelAdapter, ChannelCapabilities, OutboundMessage } from "../../../src/channels/types.js";
import { type ConfigInput, parseConfig } from "../../../src/config/index.js";
import type { AdapterRegistry } from "../../../src/delivery/index.js";
import { createLogger, silentLogger } from "../../../src/log.js";
import { RetryLaterError } from "../../../src/pipeline/types.js";
import type { ModelRequest } from "../../../src/services/models.js";
import type { SessionEntry, TranscriptMessage } from "../../../src/store/types.js";
import type { ToolCaller } from "../../../src/tools/types.js";
import { eventually, tempDir } from "../../helpers.js";

/**
 * sessions_spawn, the completion announce, cleanup/archive, subagents and sessions_yield through
 * the real app: tools.invoke for the checks, the scripted model for the flows. A "gate" provider
 * (scripted, patched to wait for the test) keeps chosen children running until released.
 */

// ─── fixtures ────────────────────────────────────────────────────────────────────────────────

class MemoryChannel implements ChannelAdapter {
  readonly accountId = "default";
  readonly capabilities: ChannelCapabilities;
  readonly sent: OutboundMessage[] = [];
  threads = 0;

  constructor(
    readonly channel: string,
    threads: boolean,
  ) {
    this.capabilities = {
      textLimit: 100_000,
      threads,
      typing: false,
      markdown: "plain",
      createThread: threads,
    };
    if (threads) {
      this.createThread = async (_to: string, _title: string) => ({ threadId: `thr-${++this.threads}` });
    }
  }

  createThread?: (to: string, title: string) => Promise<{ threadId: string }>;
  async start() {}
  async stop() {}
  async send(msg: OutboundMessage) {
    this.sent.push(msg);
    return { messageIds: [`m${this.sent.length}`] };
  }
  status() {
    return { state: "connected" as const };
  }
  about(key: string) {
    return this.sent.filter((m) => m.text.includes(key));
  }
}

const gate = { open: Promise.resolve(), release: () => {} };
function closeGate() {
  gate.open = new Promise<void>((r) => {
    gate.release = r;
  });
}
function openGate() {
  gate.release();
}
function waitGate(signal?: AbortSignal): Promise<void> {
  const p = gate.open;
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    void p.then(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}

/** A scripted rule with tool calls; `then` is its reply once the tool results are back. */
function toolRule(match: string | { contains: string }, toolCalls: unknown[], thenText: string) {
  // biome-ignore lint/suspicious/noThenProperty: the scripted rule schema names this field `then`
  return { match, toolCalls, then: thenText };
}

const RULES = [
  { match: { contains: "[Steering from the requester]" }, reply: "steered: ok" },
  { match: { contains: "Status: ok" }, reply: "Summary: the sub-agent succeeded" },
  { match: { contains: "[Subagent Task]: skip" }, reply: "ANNOUNCE_SKIP" },
  { match: { contains: "[Subagent Task]: slow" }, reply: "too late", delayMs: 20_000 },
  { match: { contains: "[Subagent Task]: tools-only" }, toolCalls: [{ name: "sessions_yield", args: {} }] },
  toolRule({ contains: "[Subagent Task]: steerable" }, [{ name: "sessions_list", args: {} }], "not steered"),
  toolRule(
    { contains: "[Subagent Task]: conduct" },
    [
      { name: "sessions_spawn", args: { task: "leaf job" } },
      { name: "sessions_yield", args: { reason: "waiting for the leaf" } },
    ],
    "SHOULD NOT APPEAR",
  ),
  toolRule(
    { contains: "[Subagent Task]: hold the fort" },
    [{ name: "sessions_spawn", args: { task: "hold", model: "gate/m" } }],
    "holding",
  ),
  toolRule(
    { contains: "[Subagent Task]: delegate" },
    [{ name: "sessions_spawn", args: { task: "skip it" } }],
    "delegated",
  ),
  toolRule(
    { contains: "[Subagent Task]: orchestrate" },
    [{ name: "sessions_spawn", args: { task: "leaf job" } }],
    "orchestrating",
  ),
  { match: "\\[Subagent Task\\]: (.+)$", reply: "done: $1" },
  toolRule(
    "^spawn-and-wait (.+)$",
    [
      { name: "sessions_spawn", args: { task: "$1", model: "gate/m" } },
      { name: "sessions_yield", args: { reason: "waiting" } },
    ],
    "SHOULD NOT APPEAR",
  ),
  toolRule(
    "^spawn-files$",
    [
      {
        name: "sessions_spawn",
        args: { task: "read the notes", attachments: [{ name: "notes.txt", content: "SECRET-CONTENT-123" }] },
      },
    ],
    "sent the files",
  ),
  toolRule(
    "^spawn (.+)$",
    [{ name: "sessions_spawn", args: { task: "$1", label: "moon" } }],
    "spawned: {{lastToolResult}}",
  ),
];

const providers = {
  s: {
    kind: "scripted" as const,
    rules: RULES,
    models: { m: { price: { inputPerMTok: 1000, outputPerMTok: 1000 } } },
  },
  gate: { kind: "scripted" as const, rules: RULES },
  other: { kind: "scripted" as const, rules: RULES },
  manual: { kind: "scripted" as const, rules: RULES },
  bad: { kind: "openai" as const, baseUrl: "http://127.0.0.1:1/v1", apiKey: "test-key", maxRetries: 0 },
};

interface Booted {
  app: App;
  dir: string;
  chan: MemoryChannel;
  plain: MemoryChannel;
  /** Completed announce jobs by job id (how many times the handler finished). */
  announced: Map<string, number>;
  /** Requests the gated provider received (system prompts included). */
  gateRequests: ModelRequest[];
  clock: { offsetMs: number };
  rpc(method: string, params: Record<string, unknown>): Promise<{ ok: boolean; result?: any; error?: any }>;
  invoke(sessionKey: string, tool: string, args?: Record<string, unknown>): Promise<any>;
  requester(
    agentId: string,
    route?: { channel?: string; to: string; threadId?: string },
  ): Promise<SessionEntry>;
  transcript(key: string): Promise<TranscriptMessage[]>;
  childrenOf(key: string): Promise<SessionEntry[]>;
  waitAnnounced(runId: string): Promise<void>;
  stop(): Promise<void>;
}

async function boot(
  cfg: Partial<ConfigInput>,
  opts: { dir?: string; keepDir?: boolean; before?: (app: App) => void } = {},
): Promise<Booted> {
  const t = opts.dir ? { dir: opts.dir, cleanup: () => {} } : tempDir();
  const config = parseConfig({ stateDir: t.dir, ...cfg, gateway: { port: 0 } });
  const clock = { offsetMs: 0 };
  const app = await createApp(
    { config, source: null, baseDir: t.dir },
    {
      logger: process.env.SPAWN_DEBUG ? createLogger({ level: "debug" }) : silentLogger(),
      role: "gateway",
      serve: false,
      now: () => Date.now() + clock.offsetMs,
    },
  );
  const chan = new MemoryChannel("memchat", true);
  const plain = new MemoryChannel("plainchat", false);
  const registry = app.services.channels as AdapterRegistry;
  registry.add(chan);
  registry.add(plain);
  const gated = app.services.models.resolve("gate/m").provider;
  const complete = gated.complete.bind(gated);
  const gateRequests: ModelRequest[] = [];
  gated.complete = async (req: ModelRequest) => {
    gateRequests.push(req);
    await waitGate(req.signal);
    return complete(req);
  };
  const announced = new Map<string, number>();
  opts.before?.(app);
  const handler = app.handlers.background.announce;
  if (handler) {
    app.handlers.background.announce = async (job, ctx) => {
      await handler(job, ctx);
      announced.set(job.id, (announced.get(job.id) ?? 0) + 1);
    };
  }
  await app.start();
  const rpc = async (method: string, params: Record<string, unknown>) => {
    const r = await app.rpc.dispatch({ id: 1, method, params });
    return r.ok ? { ok: true, result: r.result as any } : { ok: false, error: r.error };
  };
  const store = app.services.store;
  return {
    app,
    dir: t.dir,
    chan,
    plain,
    announced,
    gateRequests,
    clock,
    rpc,
    async invoke(sessionKey, tool, args = {}) {
      const r = await rpc("tools.invoke", { sessionKey, tool, args });
      if (!r.ok)
        throw Object.assign(new Error(`${r.error?.code}: ${r.error?.message}`), { code: r.error?.code });
      return r.result;
    },
    async requester(agentId, route) {
      const now = app.services.now();
      const channel = route?.channel ?? "memchat";
      const key = route
        ? `agent:${agentId}:${channel}:group:${randomUUID().slice(0, 8)}`
        : `agent:${agentId}:hook:${randomUUID()}`;
      const entry: SessionEntry = {
        key,
        sessionId: randomUUID(),
        agentId,
        createdAt: now,
        updatedAt: now,
        ...(route
          ? {
              channel,
              chatType: "group" as const,
              deliveryContext: {
                channel,
                to: route.to,
                accountId: "default",
                ...(route.threadId ? { threadId: route.threadId } : {}),
              },
            }
          : {}),
      };
      await store.sessions.put(entry);
      return entry;
    },
    async transcript(key) {
      const e = await store.sessions.get(key);
      if (!e) return [];
      return store.transcripts.readTail(
        { agentId: e.agentId, sessionId: e.sessionId },
        { limit: 500, includeTools: true },
      );
    },
    async childrenOf(key) {
      return store.sessions.list({ spawnedBy: key, includeArchived: true, limit: 100 });
    },
    async waitAnnounced(runId) {
      await eventually(() => announced.has(`announce:${runId}`), 3000, 10);
    },
    async stop() {
      await app.stop();
      if (!opts.keepDir) t.cleanup();
    },
  };
}

function callerOf(entry: SessionEntry): ToolCaller {
  return {
    sessionKey: entry.key,
    agentId: entry.agentId,
    entry,
    depth: entry.spawnDepth ?? 0,
    sandboxed: false,
  };
}

const runOf = async (b: Booted, runId: string) => b.app.services.store.runs.get(runId);
/** Condition-driven wait, bounded by count (10 s at most), never a fixed sleep. */
const until = <T>(fn: () => T | Promise<T>) => eventually(fn, 1000, 10);

// ─── checks through tools.invoke ─────────────────────────────────────────────────────────────

describe("sessions_spawn: checks before anything is created", () => {
  let b: Booted;
  const count = () => b.app.services.store.sessions.count();

  beforeAll(async () => {
    b = await boot({
      models: { default: "s/m", providers, allowed: ["s/*", "gate/*"] },
      tools: {
        sessions_spawn: {
          attachments: { enabled: true, maxFiles: 3, maxFileBytes: 100, maxTotalBytes: 150 },
        },
        subagents: { tools: { allow: [], deny: ["subagents"] } },
      },
      agents: {
        defaults: {
          subagents: { maxChildren: 2, maxSpawnDepth: 1, runTimeoutSeconds: 0, archiveAfterMinutes: 60 },
        },
        list: [
          { id: "main", subagents: { allowAgents: ["research"] } },
          { id: "research" },
          { id: "ops", subagents: { allowAgents: ["*"] } },
          { id: "deep", subagents: { allowAgents: [], maxSpawnDepth: 2 } },
          { id: "sbx", sandbox: { mode: "all" }, subagents: { allowAgents: ["main"] } },
        ],
      },
    });
  });
  afterAll(async () => {
    openGate();
    await b?.stop();
  });

  it("the JSON schema lists the agent ids the caller may use", async () => {
    const enumFor = async (agentId: string) => {
      const r = await b.requester(agentId);
      const spec = b.app.tools.specs(b.app.services, callerOf(r)).find((s) => s.name === "sessions_spawn");
      return (spec?.parameters as any)?.properties?.agentId?.enum;
    };
    expect(await enumFor("main")).toEqual(["main", "research"]);
    expect(await enumFor("research")).toEqual(["research"]);
    expect(await enumFor("ops")).toEqual(["ops", "deep", "main", "research", "sbx"]);
  });

  it("agentId outside the allow-list or unconfigured is forbidden, naming the allowed ids", async () => {
    const r = await b.requester("main");
    const before = await count();
    const denied = await b.invoke(r.key, "sessions_spawn", { task: "x", agentId: "ops" });
    expect(denied.status).toBe("forbidden");
    expect(denied.error).toContain("allowed: main, research");
    const ghost = await b.invoke(r.key, "sessions_spawn", { task: "x", agentId: "ghost" });
    expect(ghost.status).toBe("forbidden");
    expect(ghost.error).toContain("not a configured agent");
    expect(await count()).toBe(before);

    const ok = await b.invoke(r.key, "sessions_spawn", {
      task: "look up",
      agentId: "Research",
      label: "lookup",
    });
    expect(ok).toMatchObject({ status: "accepted", mode: "run" });
    expect(ok.note).toContain("do not poll");
    expect(ok.childSessionKey).toMatch(/^agent:research:subagent:[0-9a-f-]{36}$/);
    const child = await b.app.services.store.sessions.get(ok.childSessionKey);
    expect(child).toMatchObject({ agentId: "research", spawnedBy: r.key, spawnDepth: 1, label: "lookup" });
    expect(child?.subagent).toMatchObject({ task: "look up", runId: ok.runId, mode: "run", cleanup: "keep" });
    expect(await count()).toBe(before + 1);
    const run = await runOf(b, ok.runId);
    expect(run).toMatchObject({ sessionKey: ok.childSessionKey, deliver: false, origin: "spawn" });
  });

  it.each(["channel", "to", "threadId", "replyTo"])("delivery key %s is an input error", async (key) => {
    const r = await b.requester("main");
    await expect(b.invoke(r.key, "sessions_spawn", { task: "x", [key]: "1" })).rejects.toMatchObject({
      code: "INVALID_PARAMS",
      message: expect.stringContaining(key),
    });
  });

  it("model and thinking are validated with status error and nothing created", async () => {
    const r = await b.requester("main");
    const before = await count();
    const unknown = await b.invoke(r.key, "sessions_spawn", { task: "x", model: "nope/x" });
    expect(unknown.status).toBe("error");
    expect(unknown.error).toContain("nope");
    const notAllowed = await b.invoke(r.key, "sessions_spawn", { task: "x", model: "other/m" });
    expect(notAllowed).toMatchObject({ status: "error", error: expect.stringContaining("models.allowed") });
    const thinking = await b.invoke(r.key, "sessions_spawn", { task: "x", thinking: "extreme" });
    expect(thinking).toMatchObject({
      status: "error",
      error: expect.stringContaining("off, minimal, low, medium, high"),
    });
    expect(await count()).toBe(before);
    expect(await b.childrenOf(r.key)).toEqual([]);

    const ok = await b.invoke(r.key, "sessions_spawn", { task: "x", model: "s/m", thinking: "High" });
    expect(ok).toMatchObject({ status: "accepted", modelApplied: "s/m" });
    const child = await b.app.services.store.sessions.get(ok.childSessionKey);
    expect(child).toMatchObject({ model: "s/m", thinkingLevel: "high" });
  });

  it("mode session needs thread: true; a channel without threads is an error that leaves nothing", async () => {
    const r = await b.requester("main", { channel: "plainchat", to: "room-p" });
    const before = await count();
    const mode = await b.invoke(r.key, "sessions_spawn", { task: "x", mode: "session" });
    expect(mode).toMatchObject({ status: "error", error: expect.stringContaining("thread: true") });
    const thread = await b.invoke(r.key, "sessions_spawn", { task: "x", thread: true });
    expect(thread).toMatchObject({
      status: "error",
      error: expect.stringContaining("cannot create threads"),
    });
    const noChat = await b.invoke((await b.requester("main")).key, "sessions_spawn", {
      task: "x",
      thread: true,
    });
    expect(noChat.status).toBe("error");
    expect(await count()).toBe(before + 1); // only the second requester itself
    expect(await b.childrenOf(r.key)).toEqual([]);
    expect(await b.app.services.store.kv.list("threadBindings")).toEqual([]);
  });

  it("thread: true binds a new thread, forces keep, and the child posts its output there", async () => {
    const r = await b.requester("main", { to: "room-9" });
    const threadsBefore = b.chan.threads;
    const res = await b.invoke(r.key, "sessions_spawn", {
      task: "threaded work",
      thread: true,
      cleanup: "delete",
    });
    expect(res).toMatchObject({ status: "accepted", mode: "session", threadId: `thr-${threadsBefore + 1}` });
    const child = await b.app.services.store.sessions.get(res.childSessionKey);
    expect(child?.threadBinding).toMatchObject({
      channel: "memchat",
      to: "room-9",
      threadId: res.threadId,
      accountId: "default",
    });
    expect(child?.deliveryContext).toMatchObject({
      channel: "memchat",
      to: "room-9",
      threadId: res.threadId,
    });
    expect(child?.subagent).toMatchObject({ mode: "session", cleanup: "keep" });
    expect(
      await b.app.services.store.kv.get("threadBindings", `memchat:default:room-9:${res.threadId}`),
    ).toMatchObject({
      sessionKey: res.childSessionKey,
    });
    await b.waitAnnounced(res.runId);
    const posted = b.chan.sent.filter((m) => m.to === "room-9");
    expect(posted).toHaveLength(1);
    expect(posted[0]).toMatchObject({ threadId: res.threadId, text: "done: threaded work" });
    const announce = (await b.transcript(r.key)).filter((m) => m.provenance?.kind === "subagent_announce");
    expect(announce).toHaveLength(1);
    expect(await b.app.services.store.sessions.get(res.childSessionKey)).not.toBeNull(); // kept
  });

  it("a thread-bound child gets the forked context by default; a plain spawn stays isolated", async () => {
    const r = await b.requester("main", { to: "room-fork" });
    const ref = { agentId: r.agentId, sessionId: r.sessionId };
    await b.app.services.store.transcripts.append(ref, {
      id: "u-fork",
      sessionId: r.sessionId,
      role: "user",
      content: "remember the blue door",
      timestamp: b.app.services.now(),
    });
    const threaded = await b.invoke(r.key, "sessions_spawn", {
      task: "fork check",
      thread: true,
      model: "gate/m",
    });
    expect(threaded.status).toBe("accepted");
    const req = await until(() => b.gateRequests.find((q) => q.system.includes(threaded.childSessionKey)));
    expect(req.system).toContain("## Requester conversation");
    expect(req.system).toContain("remember the blue door");
    const explicit = await b.invoke(r.key, "sessions_spawn", {
      task: "fork check",
      thread: true,
      context: "isolated",
      model: "gate/m",
    });
    const req2 = await until(() => b.gateRequests.find((q) => q.system.includes(explicit.childSessionKey)));
    expect(req2.system).not.toContain("remember the blue door");
    const plain = await b.invoke(r.key, "sessions_spawn", { task: "fork check", model: "gate/m" });
    const req3 = await until(() => b.gateRequests.find((q) => q.system.includes(plain.childSessionKey)));
    expect(req3.system).not.toContain("remember the blue door");
  });

  it("sourceChannel of one requester is the same on spawn and on send (the row's channel rule)", async () => {
    const now = b.app.services.now();
    const key = `agent:main:direct:src-${randomUUID().slice(0, 8)}`;
    await b.app.services.store.sessions.put({
      key,
      sessionId: randomUUID(),
      agentId: "main",
      createdAt: now,
      updatedAt: now,
    });
    const res = await b.invoke(key, "sessions_spawn", { task: "src check", model: "gate/m" });
    await b.invoke(key, "sessions_send", {
      sessionKey: res.childSessionKey,
      message: "ping",
      timeoutSeconds: 0,
    });
    const msgs = await until(async () => {
      const t = (await b.transcript(res.childSessionKey)).filter(
        (m) => m.provenance?.kind === "inter_session",
      );
      // The send's ping-pong rounds may have added more by now: the first two are the spawn's and the send's.
      return t.length >= 2 ? t.slice(0, 2) : null;
    });
    expect(msgs.map((m) => m.provenance?.sourceTool)).toEqual(["sessions_spawn", "sessions_send"]);
    const channels = msgs.map((m) => m.provenance?.sourceChannel);
    expect(channels[0]).toBeDefined();
    expect(channels).toEqual([channels[0], channels[0]]);
  });

  it('runtime "acp" is unsupported (attachments refused first); "subagent" is the default', async () => {
    const r = await b.requester("main");
    const before = await count();
    expect(await b.invoke(r.key, "sessions_spawn", { task: "x", runtime: "acp" })).toMatchObject({
      status: "error",
      code: "unsupported_runtime",
      error: expect.stringContaining('"subagent"'),
    });
    expect(
      await b.invoke(r.key, "sessions_spawn", {
        task: "x",
        runtime: "acp",
        attachments: [{ name: "a.txt", content: "a" }],
      }),
    ).toMatchObject({ status: "error", code: "attachments_unsupported_runtime" });
    expect(await count()).toBe(before);
    expect((await b.invoke(r.key, "sessions_spawn", { task: "x", runtime: "subagent" })).status).toBe(
      "accepted",
    );
    await expect(b.invoke(r.key, "sessions_spawn", { task: "x", runtime: "docker" })).rejects.toMatchObject({
      code: "INVALID_PARAMS",
    });
  });

  it("sandbox: require needs a sandboxed target; a sandboxed caller cannot spawn an unsandboxed one", async () => {
    const r = await b.requester("main");
    const req = await b.invoke(r.key, "sessions_spawn", { task: "x", sandbox: "require" });
    expect(req).toMatchObject({ status: "forbidden", error: expect.stringContaining("sandbox") });
    const s = await b.requester("sbx");
    const down = await b.invoke(s.key, "sessions_spawn", { task: "x", agentId: "main" });
    expect(down).toMatchObject({ status: "forbidden", error: expect.stringContaining("sandboxed") });
    expect(await b.childrenOf(r.key)).toEqual([]);
    expect(await b.childrenOf(s.key)).toEqual([]);
    const same = await b.invoke(s.key, "sessions_spawn", { task: "x", sandbox: "require" });
    expect(same.status).toBe("accepted");
    expect(await b.app.services.store.sessions.get(same.childSessionKey)).toMatchObject({
      sandboxed: true,
      subagent: { sandboxed: true },
    });
  });

  it("depth: a leaf cannot spawn; maxSpawnDepth 2 allows one more level with spawnDepth recorded", async () => {
    const r = await b.requester("main");
    const c = await b.invoke(r.key, "sessions_spawn", { task: "x" });
    await expect(b.invoke(c.childSessionKey, "sessions_spawn", { task: "y" })).rejects.toMatchObject({
      code: "FORBIDDEN",
    });

    const d = await b.requester("deep");
    const d1 = await b.invoke(d.key, "sessions_spawn", { task: "x" });
    const d2 = await b.invoke(d1.childSessionKey, "sessions_spawn", { task: "y" });
    expect(d2.status).toBe("accepted");
    expect(await b.app.services.store.sessions.get(d2.childSessionKey)).toMatchObject({
      spawnDepth: 2,
      spawnedBy: d1.childSessionKey,
    });
    await expect(b.invoke(d2.childSessionKey, "sessions_spawn", { task: "z" })).rejects.toMatchObject({
      code: "FORBIDDEN",
    });
  });

  it("child tools: sub-agents lose send/status/agents_list, leaves also lose the rest, then tools.subagents.tools applies", async () => {
    const r = await b.requester("main");
    const leaf = await b.invoke(r.key, "sessions_spawn", { task: "x" });
    const leafEntry = (await b.app.services.store.sessions.get(leaf.childSessionKey))!;
    // A default leaf has no session tools: it has nothing to look at and no children to wait for.
    expect([...b.app.tools.allowedFor(b.app.services, callerOf(leafEntry))].sort()).toEqual([]);
    for (const tool of ["sessions_list", "sessions_yield"]) {
      await expect(b.invoke(leaf.childSessionKey, tool, {})).rejects.toMatchObject({ code: "FORBIDDEN" });
    }

    const d = await b.requester("deep");
    const mid = await b.invoke(d.key, "sessions_spawn", { task: "x" });
    const midEntry = (await b.app.services.store.sessions.get(mid.childSessionKey))!;
    // deep's children are orchestrators (depth 1 < 2); `subagents` is denied by tools.subagents.tools.deny.
    expect([...b.app.tools.allowedFor(b.app.services, callerOf(midEntry))].sort()).toEqual([
      "sessions_history",
      "sessions_list",
      "sessions_spawn",
      "sessions_yield",
    ]);
  });

  it("maxChildren counts unfinished children only", async () => {
    closeGate();
    const r = await b.requester("main");
    const a = await b.invoke(r.key, "sessions_spawn", { task: "one", model: "gate/m" });
    await b.invoke(r.key, "sessions_spawn", { task: "two", model: "gate/m" });
    const third = await b.invoke(r.key, "sessions_spawn", { task: "three" });
    expect(third).toMatchObject({ status: "forbidden", error: expect.stringContaining("maxChildren 2") });
    expect(await b.childrenOf(r.key)).toHaveLength(2);
    await until(async () => (await runOf(b, a.runId))?.status === "running");
    const k = await b.invoke(r.key, "subagents", { action: "kill", target: a.childSessionKey });
    expect(k).toMatchObject({ status: "ok", killed: 1 });
    await until(async () => (await runOf(b, a.runId))?.status === "aborted");
    expect((await b.invoke(r.key, "sessions_spawn", { task: "three" })).status).toBe("accepted");
    openGate();
  });

  it("the child's system prompt carries the sub-agent rules, the attachments note and a forked context", async () => {
    const r = await b.requester("main");
    const said = await b.rpc("chat.send", {
      sessionKey: r.key,
      message: "hello there friend",
      timeoutSeconds: 10,
    });
    expect(said.ok).toBe(true);
    const res = await b.invoke(r.key, "sessions_spawn", {
      task: "check",
      model: "gate/m",
      context: "fork",
      attachments: [{ name: "a.txt", content: "data" }],
      attachAs: { mountPath: "/mnt/in\u0007" },
    });
    expect(res.status).toBe("accepted");
    const req = await until(() => b.gateRequests.find((q) => q.system.includes(res.childSessionKey)));
    const child = (await b.app.services.store.sessions.get(res.childSessionKey))!;
    const dir = path.join(b.dir, "workspaces", child.sessionId, res.attachments.relDir);
    expect(req.system).toContain("## Sub-agent");
    expect(req.system).toContain(`created by ${r.key}`);
    expect(req.system).toContain("ANNOUNCE_SKIP");
    expect(req.system).toContain(`1 file(s) (4 bytes) were provided in ${dir}`);
    expect(req.system).toContain("untrusted");
    expect(req.system).toContain("as /mnt/in.");
    expect(req.system).toContain("## Requester conversation");
    expect(req.system).toContain("hello there friend");
    const isolated = await b.invoke(r.key, "sessions_spawn", { task: "check", model: "gate/m" });
    const req2 = await until(() => b.gateRequests.find((q) => q.system.includes(isolated.childSessionKey)));
    expect(req2.system).not.toContain("hello there friend");
    expect(req2.system).not.toContain("## Attachments");
  });

  it("sessions_yield without a running turn is an error", async () => {
    const r = await b.requester("main");
    expect(await b.invoke(r.key, "sessions_yield", { reason: "x" })).toMatchObject({ status: "error" });
  });

  describe("attachments", () => {
    const workspaces = () => path.join(b.dir, "workspaces");
    const cases: Array<[string, unknown[]]> = [
      ["attachments_invalid_name", [{ name: "../x", content: "a" }]],
      ["attachments_invalid_name", [{ name: "a/b", content: "a" }]],
      ["attachments_invalid_name", [{ name: ".manifest.json", content: "a" }]],
      ["attachments_invalid_name", [{ name: "..", content: "a" }]],
      ["attachments_invalid_name", [{ name: "tab\there", content: "a" }]],
      [
        "attachments_duplicate_name",
        [
          { name: "a", content: "1" },
          { name: "a", content: "2" },
        ],
      ],
      ["attachments_invalid_base64", [{ name: "a", content: "%%%%", encoding: "base64" }]],
      ["attachments_file_bytes_exceeded", [{ name: "a", content: "x".repeat(101) }]],
      [
        "attachments_total_bytes_exceeded",
        [
          { name: "a", content: "x".repeat(80) },
          { name: "b", content: "y".repeat(80) },
        ],
      ],
      ["attachments_file_count_exceeded", ["a", "b", "c", "d"].map((name) => ({ name, content: "1" }))],
    ];

    it.each(cases)("%s leaves nothing behind", async (code, attachments) => {
      const r = await b.requester("main");
      const before = await count();
      const list = () => (existsSync(workspaces()) ? readdirSync(workspaces()).sort() : []);
      const foldersBefore = list();
      const res = await b.invoke(r.key, "sessions_spawn", { task: "x", attachments });
      expect(res).toMatchObject({ status: "error", code });
      expect(await count()).toBe(before);
      expect(await b.childrenOf(r.key)).toEqual([]);
      expect(list()).toEqual(foldersBefore);
    });

    it("writes files, manifest and receipts into a private folder and tells the child", async () => {
      const r = await b.requester("main");
      const bin = Buffer.from([0, 1, 2, 250]);
      const res = await b.invoke(r.key, "sessions_spawn", {
        task: "inspect the files",
        attachments: [
          { name: "notes.txt", content: "hello" },
          {
            name: "blob.bin",
            content: bin.toString("base64"),
            encoding: "base64",
            mimeType: "application/octet-stream",
          },
        ],
        attachAs: { mountPath: "/mnt/in\u0000" },
      });
      expect(res.status).toBe("accepted");
      const child = (await b.app.services.store.sessions.get(res.childSessionKey))!;
      const dir = path.join(workspaces(), child.sessionId, res.attachments.relDir);
      expect(res.attachments).toEqual({
        count: 2,
        totalBytes: 9,
        relDir: expect.stringMatching(/^\.switchboard\/attachments\/[0-9a-f-]{36}$/),
        files: [
          { name: "notes.txt", bytes: 5, sha256: createHash("sha256").update("hello").digest("hex") },
          { name: "blob.bin", bytes: 4, sha256: createHash("sha256").update(bin).digest("hex") },
        ],
      });
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(readFileSync(path.join(dir, "blob.bin"))).toEqual(bin);
      const manifest = JSON.parse(readFileSync(path.join(dir, ".manifest.json"), "utf8"));
      expect(manifest.files.map((f: { name: string }) => f.name)).toEqual(["notes.txt", "blob.bin"]);
      await until(async () => (await b.transcript(res.childSessionKey)).length > 0);
      const first = (await b.transcript(res.childSessionKey))[0]!;
      expect(first.content).toContain(dir);
      expect(first.content).toContain("untrusted");
      expect(String(first.content).endsWith("[Subagent Task]: inspect the files")).toBe(true);
    });

    it("through a model loop, the contents never enter the caller's transcript", async () => {
      const r = await b.requester("main");
      const sent = await b.rpc("chat.send", {
        sessionKey: r.key,
        message: "spawn-files",
        timeoutSeconds: 10,
      });
      expect(sent.result).toMatchObject({ status: "ok", reply: "sent the files" });
      const [child] = await b.childrenOf(r.key);
      expect(child).toBeDefined();
      const file = b.app.services.store.transcripts.locate({ agentId: r.agentId, sessionId: r.sessionId });
      const raw = readFileSync(file, "utf8");
      expect(raw).toContain("notes.txt");
      // Each attachment's content is replaced by { name, bytes, sha256 } in the caller's transcript.
      const call = (await b.transcript(r.key)).find((m) => m.role === "toolCall");
      const callArgs = JSON.parse((call?.content as { arguments?: string } | undefined)?.arguments ?? "{}");
      expect(callArgs.attachments[0]).toEqual({
        name: "notes.txt",
        bytes: 18,
        sha256: createHash("sha256").update("SECRET-CONTENT-123").digest("hex"),
      });
      expect(raw).not.toContain("SECRET-CONTENT-123");
      const relDir = JSON.parse(
        String((await b.transcript(r.key)).find((m) => m.role === "toolResult")?.content ?? "{}"),
      ).attachments.relDir;
      const onDisk = readFileSync(path.join(workspaces(), child!.sessionId, relDir, "notes.txt"), "utf8");
      expect(onDisk).toBe("SECRET-CONTENT-123");
    });
  });
});

// ─── completion announces, cleanup, archive, subagents, yield ────────────────────────────────

const flowConfig: Partial<ConfigInput> = {
  models: { default: "s/m", providers },
  agents: {
    defaults: {
      subagents: { maxSpawnDepth: 2, maxChildren: 10, runTimeoutSeconds: 0, archiveAfterMinutes: 60 },
    },
    list: [
      { id: "main", subagents: { allowAgents: ["arch"] } },
      { id: "arch", subagents: { archiveAfterMinutes: 0.001 } },
      { id: "quickie", subagents: { runTimeoutSeconds: 0.2 } },
    ],
  },
};

/**
 * A main-agent requester in `room` spawns an orchestrator with `task`; resolves once the
 * orchestrator's one child has been announced (to the orchestrator).
 */
async function orchestrated(b: Booted, task: string, room: string) {
  const r = await b.requester("main", { to: room });
  const o = await b.invoke(r.key, "sessions_spawn", { task });
  await until(async () => (await b.childrenOf(o.childSessionKey)).length === 1);
  const [leaf] = await b.childrenOf(o.childSessionKey);
  await b.waitAnnounced(leaf!.subagent!.runId);
  return { r, o, leaf: leaf! };
}

describe("completion announce and cleanup", () => {
  let b: Booted;
  beforeAll(async () => {
    b = await boot(flowConfig);
  });
  afterAll(async () => {
    openGate();
    await b?.stop();
  });

  it("a model-loop spawn announces exactly once into the requester's chat (thread kept) and transcript", async () => {
    const r = await b.requester("main", { to: "room-1", threadId: "th-1" });
    const sent = await b.rpc("chat.send", {
      sessionKey: r.key,
      message: "spawn research the moon",
      timeoutSeconds: 10,
    });
    expect(sent.result.reply).toContain('"status":"accepted"');
    const [child] = await b.childrenOf(r.key);
    const runId = child!.subagent!.runId;
    await b.waitAnnounced(runId);
    const posted = b.chan.about(child!.key);
    expect(posted).toHaveLength(1);
    expect(posted[0]).toMatchObject({ to: "room-1", threadId: "th-1" });
    const text = posted[0]!.text;
    expect(text).toContain("[Sub-agent completion] moon");
    expect(text).toContain("Status: ok");
    expect(text).toContain("Result: done: research the moon");
    expect(text).toContain("Notes: - (none)");
    expect(text).toMatch(/Stats: runtime \d+s • tokens \S+ \(in \S+ \/ out \S+\) • cost \$\d+\.\d{4} • /);
    expect(text).toContain(`sessionKey ${child!.key} • sessionId ${child!.sessionId} • transcript `);
    const inReq = (await b.transcript(r.key)).filter((m) => m.provenance?.kind === "subagent_announce");
    expect(inReq).toHaveLength(1);
    expect(inReq[0]).toMatchObject({ role: "user", content: text });
    expect(inReq[0]!.provenance).toEqual({
      kind: "subagent_announce",
      sourceSessionKey: child!.key,
      sourceRunId: runId,
    });
    const first = (await b.transcript(child!.key))[0]!;
    expect(String(first.content).endsWith("[Subagent Task]: research the moon")).toBe(true);
    expect(await b.app.services.store.sessions.get(child!.key)).toMatchObject({
      subagent: { outcome: "ok" },
    });
    expect(b.announced.get(`announce:${runId}`)).toBe(1);
  });

  it("ANNOUNCE_SKIP suppresses it (and cleanup delete still runs)", async () => {
    const r = await b.requester("main", { to: "room-skip" });
    const res = await b.invoke(r.key, "sessions_spawn", { task: "skip this", cleanup: "delete" });
    await b.waitAnnounced(res.runId);
    expect(b.chan.about(res.childSessionKey)).toEqual([]);
    expect(b.chan.sent.filter((m) => m.to === "room-skip")).toEqual([]);
    expect((await b.transcript(r.key)).some((m) => m.provenance?.kind === "subagent_announce")).toBe(false);
    expect(await b.app.services.store.sessions.get(res.childSessionKey)).toBeNull();
  });

  it("timeout and error outcomes come from the run, not the model text", async () => {
    const r = await b.requester("main", { to: "room-t" });
    const slow = await b.invoke(r.key, "sessions_spawn", { task: "slow thing", runTimeoutSeconds: 0.2 });
    const bad = await b.invoke(r.key, "sessions_spawn", { task: "fails", model: "bad/x" });
    await b.waitAnnounced(slow.runId);
    await b.waitAnnounced(bad.runId);
    const [t] = b.chan.about(slow.childSessionKey);
    expect(t?.text).toContain("Status: timeout");
    expect(t?.text).toContain("Notes: run timed out");
    expect(t?.text).not.toContain("too late");
    const [e] = b.chan.about(bad.childSessionKey);
    expect(e?.text).toContain("Status: error");
    expect(e?.text).not.toContain("Notes: - (none)");
    expect(await b.app.services.store.sessions.get(slow.childSessionKey)).toMatchObject({
      subagent: { outcome: "timeout" },
    });
  });

  it("runTimeoutSeconds defaults to the configured value", async () => {
    const r = await b.requester("quickie", { to: "room-q-default" });
    const res = await b.invoke(r.key, "sessions_spawn", { task: "slow by default" });
    expect(await b.app.services.store.sessions.get(res.childSessionKey)).toMatchObject({
      subagent: { runTimeoutSeconds: 0.2 },
    });
    await b.waitAnnounced(res.runId);
    expect(b.chan.about(res.childSessionKey)[0]?.text).toContain("Status: timeout");
  });

  it("Result falls back to the last tool result when the final text is empty", async () => {
    const r = await b.requester("main", { to: "room-tools" });
    const res = await b.invoke(r.key, "sessions_spawn", { task: "tools-only" });
    await b.waitAnnounced(res.runId);
    const [m] = b.chan.about(res.childSessionKey);
    expect(m?.text).toContain('Result: {"status":"yielded"');
    expect(m?.text).toContain("last tool result");
  });

  it("an orchestrator requester gets the report as an inter-session turn; only its synthesis is announced", async () => {
    const { o, leaf } = await orchestrated(b, "orchestrate", "room-orch");
    await until(() => b.chan.sent.some((m) => m.text.includes("Result: Summary: the sub-agent succeeded")));
    // Its first run answered ("orchestrating") before the leaf had reported: that announce was
    // held, then dropped once the leaf's report woke it (the woken run's is the one report).
    await b.waitAnnounced(o.runId);
    const toRoom = b.chan.sent.filter((m) => m.to === "room-orch");
    expect(toRoom.map((m) => m.text.match(/Result: (.*)/)?.[1])).toEqual([
      "Summary: the sub-agent succeeded",
    ]);
    expect(toRoom[0]?.text).toContain(`sessionKey ${o.childSessionKey} `);
    expect(b.chan.about(leaf.key)).toEqual([]); // the leaf reported to its orchestrator, not to the chat
    const inOrch = (await b.transcript(o.childSessionKey)).find(
      (m) => m.provenance?.sourceSessionKey === leaf.key,
    );
    expect(inOrch).toMatchObject({
      role: "user",
      provenance: { kind: "inter_session", sourceRunId: leaf.subagent!.runId },
    });
    expect(String(inOrch?.content)).toContain("Status: ok");
  });

  it("an orchestrator that yields for its leaf is announced once, after the leaf's report woke it", async () => {
    const { r, o } = await orchestrated(b, "conduct", "room-conduct");
    await until(() => b.chan.sent.some((m) => m.to === "room-conduct"));
    await b.waitAnnounced(o.runId); // the yielded run's announce: held, then dropped
    const woken = (await b.app.services.store.sessions.get(o.childSessionKey))!.subagent!.runId;
    expect(woken).not.toBe(o.runId);
    await b.waitAnnounced(woken);
    const toRoom = b.chan.sent.filter((m) => m.to === "room-conduct");
    expect(toRoom).toHaveLength(1);
    expect(toRoom[0]?.text).toContain("Status: ok");
    expect(toRoom[0]?.text).toContain("Result: Summary: the sub-agent succeeded");
    expect(toRoom[0]?.text).not.toContain("yielded");
    const inMain = (await b.transcript(r.key)).filter((m) => m.provenance?.kind === "subagent_announce");
    expect(inMain).toHaveLength(1);
  });

  it("an orchestrator whose leaf stays silent (ANNOUNCE_SKIP) is still announced, once the leaf is done", async () => {
    const { o } = await orchestrated(b, "delegate", "room-delegate");
    await b.waitAnnounced(o.runId);
    const toRoom = b.chan.sent.filter((m) => m.to === "room-delegate");
    expect(toRoom).toHaveLength(1);
    expect(toRoom[0]?.text).toContain("Result: delegated");
    expect(await b.app.services.store.sessions.get(o.childSessionKey)).toMatchObject({
      subagent: { runId: o.runId, announcedRunId: o.runId },
    });
  });

  it("requester gone → its requester gets it; nobody left → recorded on the child", async () => {
    closeGate();
    const r = await b.requester("main", { to: "room-gone" });
    const o = await b.invoke(r.key, "sessions_spawn", { task: "hold on", model: "gate/m" });
    const leaf = await b.invoke(o.childSessionKey, "sessions_spawn", { task: "leaf work", model: "gate/m" });
    const lone = await b.requester("main");
    const orphan = await b.invoke(lone.key, "sessions_spawn", { task: "orphan work", model: "gate/m" });
    for (const id of [o.runId, leaf.runId, orphan.runId]) {
      await until(async () => (await runOf(b, id))?.status === "running");
    }
    expect((await b.rpc("sessions.delete", { sessionKey: o.childSessionKey })).ok).toBe(true);
    expect((await b.rpc("sessions.delete", { sessionKey: lone.key })).ok).toBe(true);
    openGate();
    await b.waitAnnounced(leaf.runId);
    await b.waitAnnounced(orphan.runId);
    const [m] = b.chan.about(leaf.childSessionKey);
    expect(m).toMatchObject({ to: "room-gone" });
    expect(m?.text).toContain("Result: done: leaf work");
    const kept = await b.app.services.store.sessions.get(orphan.childSessionKey);
    expect(kept?.subagent?.undeliveredAnnounce).toContain("Result: done: orphan work");
    expect(b.chan.about(orphan.childSessionKey)).toEqual([]);
  });

  it("cleanup delete removes the child after its announce; its transcript is renamed, not destroyed", async () => {
    const r = await b.requester("main", { to: "room-del" });
    const res = await b.invoke(r.key, "sessions_spawn", { task: "cleanup me", cleanup: "delete" });
    await b.waitAnnounced(res.runId);
    expect(b.chan.about(res.childSessionKey)).toHaveLength(1);
    expect(await b.app.services.store.sessions.get(res.childSessionKey)).toBeNull();
    const sessions = path.join(b.dir, "agents", "main", "sessions");
    const files = readdirSync(sessions).filter((f) => f.includes(".deleted."));
    const deleted = await b.rpc("sessions.history", { sessionKey: res.childSessionKey });
    expect(deleted.error?.code).toBe("NOT_FOUND");
    expect(files.length).toBeGreaterThan(0);
    // The announce cites the transcript's final path: the renamed file, which exists.
    const posted = b.chan.about(res.childSessionKey)[0]!.text;
    const cited = /transcript (\S+)/.exec(posted)?.[1];
    expect(cited).toContain(".deleted.");
    expect(existsSync(cited!)).toBe(true);
    expect(readFileSync(cited!, "utf8")).toContain("cleanup me");
  });

  it("keep archives the child archiveAfterMinutes after completion (renamed, entry kept)", async () => {
    const r = await b.requester("main", { to: "room-arch" });
    const res = await b.invoke(r.key, "sessions_spawn", { task: "archive me", agentId: "arch" });
    await b.waitAnnounced(res.runId);
    const entry = await until(async () => {
      const e = await b.app.services.store.sessions.get(res.childSessionKey);
      return e?.archivedAt !== undefined ? e : null;
    });
    const file = b.app.services.store.transcripts.locate({ agentId: "arch", sessionId: entry.sessionId });
    expect(existsSync(file)).toBe(false);
    expect(
      readdirSync(path.dirname(file)).some((f) => f.startsWith(`${entry.sessionId}.jsonl.archived.`)),
    ).toBe(true);
    expect(await b.app.services.store.sessions.list({ spawnedBy: r.key })).toEqual([]);
  });

  it("sessions_yield ends the turn; the completion then starts the requester's next turn", async () => {
    closeGate();
    const r = await b.requester("main", { to: "room-yield" });
    const sent = await b.rpc("chat.send", {
      sessionKey: r.key,
      message: "spawn-and-wait ponder",
      timeoutSeconds: 10,
    });
    expect(sent.result).toMatchObject({ status: "ok", reply: "" });
    const afterYield = await b.transcript(r.key);
    // No model call after the yield: nothing follows the two tool results, not even the rule's `then`.
    expect(afterYield.map((m) => m.role)).toEqual([
      "user",
      "toolCall",
      "toolResult",
      "toolCall",
      "toolResult",
    ]);
    expect(JSON.stringify(afterYield)).not.toContain("SHOULD NOT APPEAR");
    expect(await b.app.services.store.kv.get("subagents.yielded", r.key)).not.toBeNull();
    openGate();
    const [child] = await b.childrenOf(r.key);
    await b.waitAnnounced(child!.subagent!.runId);
    await until(() =>
      b.chan.sent.some((m) => m.to === "room-yield" && m.text === "Summary: the sub-agent succeeded"),
    );
    const toRoom = b.chan.sent.filter((m) => m.to === "room-yield");
    expect(toRoom).toHaveLength(2);
    expect(toRoom[0]?.text).toContain("Status: ok");
    expect(await b.app.services.store.kv.get("subagents.yielded", r.key)).toBeNull();
    const announce = (await b.transcript(r.key)).filter((m) => m.provenance?.kind === "subagent_announce");
    expect(announce).toHaveLength(1);
  });
});

describe("a completion that arrives before the requester yields", () => {
  it("still wakes the requester once it has yielded", async () => {
    const b = await boot(flowConfig);
    try {
      const r = await b.requester("main", { to: "room-early" });
      await b.app.services.store.sessions.patch(r.key, { model: "manual/m" });
      const manual = b.app.services.models.resolve("manual/m").provider;
      const reply = (text: string, toolCalls: Array<{ name: string; args: object }> = []) => ({
        text,
        toolCalls: toolCalls.map((c, i) => ({
          id: `call_${i}_${c.name}`,
          name: c.name,
          arguments: JSON.stringify(c.args),
        })),
        usage: { input: 1, output: 1 },
        stopReason: toolCalls.length ? ("tool_calls" as const) : ("stop" as const),
        model: "m",
      });
      manual.complete = async (req: ModelRequest) => {
        const last = req.messages[req.messages.length - 1];
        if (last?.role === "user" && last.content.includes("arrived while you were still working"))
          return reply("woken");
        if (last?.role === "user")
          return reply("", [{ name: "sessions_spawn", args: { task: "early bird" } }]);
        if (last?.role === "tool" && last.name === "sessions_spawn") {
          // Hold this model call until the child's completion has been announced.
          const { runId } = JSON.parse(last.content) as { runId: string };
          await b.waitAnnounced(runId);
          return reply("", [{ name: "sessions_yield", args: { reason: "waiting" } }]);
        }
        return reply("unexpected");
      };
      const sent = await b.rpc("chat.send", { sessionKey: r.key, message: "go", timeoutSeconds: 10 });
      expect(sent.result).toMatchObject({ status: "ok", reply: "" });
      await until(() => b.chan.sent.some((m) => m.to === "room-early" && m.text === "woken"));
      const toRoom = b.chan.sent.filter((m) => m.to === "room-early");
      expect(toRoom.map((m) => (m.text === "woken" ? "woken" : m.text.split("\n")[1]))).toEqual([
        "Status: ok",
        "woken",
      ]);
      expect(await b.app.services.store.kv.get("subagents.yielded", r.key)).toBeNull();
    } finally {
      await b.stop();
    }
  });
});

describe("subagents", () => {
  let b: Booted;
  beforeAll(async () => {
    b = await boot(flowConfig);
  });
  afterAll(async () => {
    openGate();
    await b?.stop();
  });

  it("list, steer (rate limited), kill and done", async () => {
    closeGate();
    const r = await b.requester("main", { to: "room-sub" });
    const alpha = await b.invoke(r.key, "sessions_spawn", {
      task: "steerable",
      label: "alpha",
      model: "gate/m",
    });
    const beta = await b.invoke(r.key, "sessions_spawn", { task: "hold", label: "beta", model: "gate/m" });
    const gamma = await b.invoke(r.key, "sessions_spawn", { task: "quick", label: "gamma" });
    await b.waitAnnounced(gamma.runId);
    for (const id of [alpha.runId, beta.runId])
      await until(async () => (await runOf(b, id))?.status === "running");

    const list = await b.invoke(r.key, "subagents", { action: "list" });
    expect(list.status).toBe("ok");
    expect(list.total).toBe(3);
    expect(list.active.map((v: any) => [v.index, v.label, v.status])).toEqual([
      [1, "beta", "running"],
      [2, "alpha", "running"],
    ]);
    expect(list.recent).toHaveLength(1);
    expect(list.recent[0]).toMatchObject({
      index: 3,
      label: "gamma",
      status: "ok",
      runId: gamma.runId,
      sessionKey: gamma.childSessionKey,
      task: "quick",
      model: "s/m",
    });
    expect(list.recent[0].totalTokens).toBeGreaterThan(0);
    expect(list.recent[0].runtimeMs).toBeGreaterThanOrEqual(0);

    const s1 = await b.invoke(r.key, "subagents", {
      action: "steer",
      target: "alpha",
      message: "focus on the rings",
    });
    expect(s1).toMatchObject({ status: "accepted", runId: alpha.runId, mode: "steer" });
    const s2 = await b.invoke(r.key, "subagents", { action: "steer", target: "2", message: "again" });
    expect(s2.status).toBe("rate_limited");
    b.clock.offsetMs += 2500;
    const s3 = await b.invoke(r.key, "subagents", {
      action: "steer",
      target: alpha.runId.slice(0, 8),
      message: "again",
    });
    expect(s3.status).toBe("accepted");
    expect(
      (await b.invoke(r.key, "subagents", { action: "steer", target: "gamma", message: "x" })).status,
    ).toBe("done");
    expect(
      (await b.invoke(r.key, "subagents", { action: "steer", target: "nobody", message: "x" })).status,
    ).toBe("error");
    expect((await b.invoke(r.key, "subagents", { action: "steer", target: "alpha" })).status).toBe("error");

    const k1 = await b.invoke(r.key, "subagents", { action: "kill", target: "beta" });
    expect(k1).toMatchObject({ status: "ok", killed: 1, sessionKey: beta.childSessionKey });
    await until(async () => (await runOf(b, beta.runId))?.status === "aborted");
    expect((await b.invoke(r.key, "subagents", { action: "kill", target: "beta" })).status).toBe("done");

    openGate();
    await b.waitAnnounced(alpha.runId);
    await b.waitAnnounced(beta.runId);
    expect(b.chan.about(alpha.childSessionKey)[0]?.text).toContain("Result: steered: ok");
    const alphaMsgs = await b.transcript(alpha.childSessionKey);
    expect(
      alphaMsgs.filter((m) => String(m.content).startsWith("[Steering from the requester]")),
    ).toHaveLength(2);
    expect(b.chan.about(beta.childSessionKey)).toHaveLength(1);
    expect(b.chan.about(beta.childSessionKey)[0]?.text).toContain("Status: aborted");
  });

  it("list names the model of a running child that has no model override (the agent's model)", async () => {
    const r = await b.requester("main", { to: "room-list-model" });
    const slow = await b.invoke(r.key, "sessions_spawn", { task: "slow listing", label: "slowpoke" });
    await until(async () => (await runOf(b, slow.runId))?.status === "running");
    const list = await b.invoke(r.key, "subagents", { action: "list" });
    expect(list.active).toHaveLength(1);
    expect(list.active[0]).toMatchObject({
      index: 1,
      runId: slow.runId,
      sessionKey: slow.childSessionKey,
      label: "slowpoke",
      task: "slow listing",
      status: "running",
      model: "s/m",
      totalTokens: 0,
    });
    expect(list.active[0].runtimeMs).toBeGreaterThanOrEqual(0);
    expect(await b.invoke(r.key, "subagents", { action: "kill", target: "slowpoke" })).toMatchObject({
      status: "ok",
      killed: 1,
    });
    await b.waitAnnounced(slow.runId);
  });

  it("kill all cascades to descendants; the killed orchestrator is not revived by their reports", async () => {
    closeGate();
    const r = await b.requester("main", { to: "room-cascade" });
    const o = await b.invoke(r.key, "sessions_spawn", { task: "hold", model: "gate/m" });
    const leaf = await b.invoke(o.childSessionKey, "sessions_spawn", { task: "hold", model: "gate/m" });
    for (const id of [o.runId, leaf.runId])
      await until(async () => (await runOf(b, id))?.status === "running");
    const k = await b.invoke(r.key, "subagents", { action: "kill", target: "all" });
    expect(k).toMatchObject({ status: "ok", killed: 2 });
    expect(k.sessionKeys.sort()).toEqual([o.childSessionKey, leaf.childSessionKey].sort());
    openGate();
    await b.waitAnnounced(o.runId);
    await b.waitAnnounced(leaf.runId);
    expect((await runOf(b, leaf.runId))?.status).toBe("aborted");
    expect(b.chan.about(o.childSessionKey)[0]?.text).toContain("Status: aborted");
    expect(b.chan.about(leaf.childSessionKey)).toEqual([]);
    const inOrch = (await b.transcript(o.childSessionKey)).filter(
      (m) => m.provenance?.kind === "subagent_announce",
    );
    expect(inOrch).toHaveLength(1);
    expect(await b.app.services.store.runs.listBySession(o.childSessionKey, 10)).toHaveLength(1);
  });
});

describe("kill of an orchestrator that has answered but waits for its children", () => {
  it("stops its children without reviving it; its own answer is announced once", async () => {
    const b = await boot(flowConfig);
    try {
      closeGate();
      const r = await b.requester("main", { to: "room-fort" });
      const o = await b.invoke(r.key, "sessions_spawn", { task: "hold the fort" });
      await until(async () => (await runOf(b, o.runId))?.status === "ok"); // it answered "holding"
      const [leaf] = await b.childrenOf(o.childSessionKey);
      await until(async () => (await runOf(b, leaf!.subagent!.runId))?.status === "running");
      const k = await b.invoke(r.key, "subagents", { action: "kill", target: "all" });
      expect(k).toMatchObject({ status: "ok", killed: 1, sessionKeys: [leaf!.key] });
      openGate();
      await b.waitAnnounced(leaf!.subagent!.runId);
      await b.waitAnnounced(o.runId);
      const toRoom = b.chan.sent.filter((m) => m.to === "room-fort");
      expect(toRoom).toHaveLength(1);
      expect(toRoom[0]?.text).toContain("Result: holding");
      // The leaf's aborted report is in its transcript, and did not start another turn.
      expect(await b.app.services.store.runs.listBySession(o.childSessionKey, 10)).toHaveLength(1);
      const reports = (await b.transcript(o.childSessionKey)).filter(
        (m) => m.provenance?.kind === "subagent_announce",
      );
      expect(reports).toHaveLength(1);
      expect(String(reports[0]?.content)).toContain("Status: aborted");
    } finally {
      await b.stop();
    }
  });
});

describe("steer restarts a queued child with the guidance", () => {
  it("the old run is aborted without an announce; the new one announces once", async () => {
    const b = await boot({ ...flowConfig, queue: { concurrency: 1 } });
    try {
      closeGate();
      const r = await b.requester("main", { to: "room-q" });
      const hold = await b.invoke(r.key, "sessions_spawn", { task: "hold", model: "gate/m" });
      await until(async () => (await runOf(b, hold.runId))?.status === "running");
      const queued = await b.invoke(r.key, "sessions_spawn", { task: "quick" });
      expect((await runOf(b, queued.runId))?.status).toBe("queued");
      const s = await b.invoke(r.key, "subagents", {
        action: "steer",
        target: queued.childSessionKey,
        message: "new direction",
      });
      expect(s).toMatchObject({ status: "accepted", mode: "restart" });
      expect(s.runId).not.toBe(queued.runId);
      expect((await runOf(b, queued.runId))?.status).toBe("aborted");
      openGate();
      await b.waitAnnounced(s.runId);
      const posted = b.chan.about(queued.childSessionKey);
      expect(posted).toHaveLength(1);
      expect(posted[0]?.text).toContain("Result: steered: ok");
      expect(b.announced.has(`announce:${queued.runId}`)).toBe(false);
    } finally {
      openGate();
      await b.stop();
    }
  });
});

describe("restart between the child's end and its announce", () => {
  it("announces exactly once after the restart", async () => {
    const t = tempDir();
    let attempts = 0;
    const first = await boot(flowConfig, {
      dir: t.dir,
      keepDir: true,
      before: (app) => {
        // The first process never gets to announce: its handler keeps deferring.
        app.handlers.background.announce = async () => {
          attempts++;
          throw new RetryLaterError("simulated crash before announcing", 20);
        };
      },
    });
    let childKey = "";
    let requesterKey = "";
    try {
      const r = await first.requester("main", { to: "room-restart" });
      requesterKey = r.key;
      const res = await first.invoke(r.key, "sessions_spawn", { task: "survive" });
      childKey = res.childSessionKey;
      await until(async () => (await runOf(first, res.runId))?.status === "ok");
      await until(() => attempts >= 1);
    } finally {
      await first.stop();
    }
    expect(first.chan.sent).toEqual([]);
    const second = await boot(flowConfig, { dir: t.dir });
    try {
      const child = await second.app.services.store.sessions.get(childKey);
      await second.waitAnnounced(child!.subagent!.runId);
      const posted = second.chan.about(childKey);
      expect(posted).toHaveLength(1);
      expect(posted[0]?.text).toContain("Result: done: survive");
      const inReq = (await second.transcript(requesterKey)).filter(
        (m) => m.provenance?.kind === "subagent_announce",
      );
      expect(inReq).toHaveLength(1);
      expect(await second.app.services.store.runs.listBySession(childKey, 10)).toHaveLength(1);
    } finally {
      await second.stop();
      t.cleanup();
    }
  });
});
