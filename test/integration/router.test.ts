import { afterEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/channels/types.js";
import type { ConfigInput } from "../../src/config/index.js";
import { threadBindingKey } from "../../src/routing/thread-bindings.js";
import { THREAD_BINDINGS_NS } from "../../src/store/kv-namespaces.js";
import type { SessionEntry } from "../../src/store/types.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { memoryInbound, startTestApp, type TestApp } from "../harness.js";

/** The router's gates and routing, driven with validated InboundMessages through the real app. */

let t: TestApp | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

let clock = 1_800_000_000_000;
async function setup(overrides: Partial<ConfigInput> = {}) {
  t = await startTestApp(
    {
      models: {
        default: "s/echo",
        providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "re: $1" }] } },
      },
      ...overrides,
    },
    { now: () => clock },
  );
  const ch = new MemoryChannel("memory", "default");
  (t.app.services.channels as unknown as { add(a: MemoryChannel): void }).add(ch);
  return { t, ch };
}

const msg = memoryInbound;

/** A depth-1 child session of `spawnedBy`, as a thread-bound spawn leaves it (its binding key aside). */
async function putChild(app: TestApp, key: string, spawnedBy: string, extra: Partial<SessionEntry> = {}) {
  await app.app.services.store.sessions.put({
    key,
    sessionId: crypto.randomUUID(),
    agentId: "main",
    createdAt: clock,
    updatedAt: clock,
    spawnedBy,
    spawnDepth: 1,
    ...extra,
  });
}

async function handleAndWait(app: TestApp, m: InboundMessage) {
  const r = await app.app.router.handle(m);
  if (r.runId) await app.app.services.pipeline.wait(r.runId, 10_000);
  return r;
}

describe("router gates", () => {
  it("dmPolicy disabled drops DMs; allowlist admits only allowFrom; nothing is created for dropped messages", async () => {
    const { t: app } = await setup({ channels: { slack: { accounts: {}, dmPolicy: "disabled" } } });
    // A channel without a config block is open; a disabled one drops every DM.
    expect((await handleAndWait(app, msg({ text: "hi" }))).accepted).toBe(true);
    expect(await app.app.router.handle(msg({ channel: "slack", text: "hi" }))).toMatchObject({
      dropped: "dm-disabled",
    });
    await app.stop();
    t = undefined;

    const { t: app2 } = await setup({
      channels: { telegram: { accounts: {}, dmPolicy: "allowlist", allowFrom: ["telegram:42"] } },
    });
    const denied = await app2.app.router.handle(
      msg({ channel: "telegram", text: "hi", senderId: "7", peerId: "7" }),
    );
    expect(denied).toMatchObject({ accepted: false, dropped: "not-allowed" });
    expect(await app2.app.services.store.sessions.count()).toBe(0);
    const ok = await handleAndWait(
      app2,
      msg({ channel: "telegram", text: "hi", senderId: "42", peerId: "42" }),
    );
    expect(ok.accepted).toBe(true);
  });

  it("groups need a mention, a reply to the bot, or a configured pattern", async () => {
    const { t: app } = await setup({
      channels: {
        slack: { accounts: {}, groups: { requireMention: true, mentionPatterns: ["\\bjarvis\\b"] } },
      },
    });
    const g = { channel: "slack", chatType: "group" as const, peerId: "g1", senderId: "u9" };
    expect((await app.app.router.handle(msg({ ...g, text: "hello all" }))).dropped).toBe("not-mentioned");
    expect((await handleAndWait(app, msg({ ...g, text: "hey Jarvis, status?" }))).accepted).toBe(true);
    expect((await handleAndWait(app, msg({ ...g, text: "thanks", replyToBot: true }))).accepted).toBe(true);
    expect((await handleAndWait(app, msg({ ...g, text: "yo", wasMentioned: true }))).accepted).toBe(true);
  });

  it("a redelivered platform message is processed once (dedupe per chat + message id)", async () => {
    const { t: app } = await setup();
    const m = msg({ text: "once" });
    expect((await handleAndWait(app, m)).accepted).toBe(true);
    expect(await app.app.router.handle(m)).toMatchObject({ accepted: false, dropped: "duplicate" });
    // The same id in another chat is another message.
    expect((await handleAndWait(app, { ...m, peerId: "u2", senderId: "u2" })).accepted).toBe(true);
  });

  it("bindings pick the agent: peer, then parent peer of a thread, then account, then channel", async () => {
    const { t: app } = await setup({
      agents: { list: [{ id: "main" }, { id: "ops" }, { id: "sales" }, { id: "eng" }] },
      bindings: [
        { agentId: "ops", match: { channel: "slack", peer: { kind: "channel", id: "C-OPS" } } },
        { agentId: "sales", match: { channel: "slack", accountId: "sales" } },
        { agentId: "eng", match: { channel: "discord" } },
      ],
    });
    const r1 = await app.app.router.handle(
      msg({ channel: "slack", chatType: "channel", peerId: "C-OPS", text: "x", wasMentioned: true }),
    );
    expect(r1.sessionKey).toBe("agent:ops:slack:channel:c-ops");
    const r2 = await app.app.router.handle(
      msg({
        channel: "slack",
        chatType: "channel",
        peerId: "C-OPS",
        threadId: "171.1",
        text: "x",
        wasMentioned: true,
      }),
    );
    expect(r2.sessionKey).toBe("agent:ops:slack:channel:c-ops:thread:171.1");
    const r3 = await app.app.router.handle(msg({ channel: "slack", accountId: "sales", text: "x" }));
    expect(r3.sessionKey).toBe("agent:sales:main");
    const r4 = await app.app.router.handle(msg({ channel: "discord", text: "x" }));
    expect(r4.sessionKey).toBe("agent:eng:main");
    const r5 = await app.app.router.handle(msg({ channel: "whatsapp", text: "x", senderId: "+1555" }));
    expect(r5.sessionKey).toBe("agent:main:main");
  });

  it("records the delivery context and replies to where the message came from (thread kept)", async () => {
    const { t: app, ch } = await setup();
    await handleAndWait(
      app,
      msg({ chatType: "channel", peerId: "c7", threadId: "th1", text: "in thread", wasMentioned: true }),
    );
    const entry = await app.app.services.store.sessions.get("agent:main:memory:channel:c7:thread:th1");
    expect(entry?.deliveryContext).toEqual({
      channel: "memory",
      to: "c7",
      accountId: "default",
      threadId: "th1",
    });
    expect(ch.sent.at(-1)).toMatchObject({ to: "c7", threadId: "th1", text: "re: in thread" });
  });
});

describe("send policy on inbound messages", () => {
  it("a chat whose type a rule denies gets no reply in a main bucket that existed before it (SEMANTICS §2)", async () => {
    const { t: app, ch } = await setup({
      session: {
        sendPolicy: { rules: [{ match: { channel: "memory", chatType: "direct" }, action: "deny" }] },
      },
    });
    // The operator wrote into main first: the bucket exists without any chat behind it.
    const sent = await app.rpc("chat.send", { sessionKey: "main", message: "hello", timeoutSeconds: 5 });
    expect(sent.ok).toBe(true);
    const r = await handleAndWait(app, msg({ text: "dm in a denied chat" }));
    expect(r).toMatchObject({ accepted: false, dropped: "send-policy", sessionKey: "agent:main:main" });
    expect(ch.sent).toEqual([]);
    const history = await app.rpc("sessions.history", { sessionKey: "main" });
    expect(JSON.stringify(history.result)).not.toContain("dm in a denied chat");
  });

  it("under scope global, a group message is judged as a group even after DMs created the bucket", async () => {
    const { t: app, ch } = await setup({
      session: { scope: "global", sendPolicy: { rules: [{ match: { chatType: "group" }, action: "deny" }] } },
    });
    expect((await handleAndWait(app, msg({ text: "dm" }))).accepted).toBe(true);
    expect(ch.texts()).toEqual(["re: dm"]);
    const g = await handleAndWait(
      app,
      msg({ chatType: "group", peerId: "g1", senderId: "u2", text: "in the group", wasMentioned: true }),
    );
    expect(g).toMatchObject({ accepted: false, dropped: "send-policy", sessionKey: "agent:main:main" });
    expect(ch.texts()).toEqual(["re: dm"]);
    // Back in the DM the bucket answers again.
    expect((await handleAndWait(app, msg({ text: "dm again" }))).accepted).toBe(true);
    expect(ch.texts()).toEqual(["re: dm", "re: dm again"]);
  });
});

describe("thread bindings", () => {
  it("a bound topic or thread belongs to its chat: the same thread id in another chat keeps its own session", async () => {
    const { t: app, ch } = await setup();
    const group = (peerId: string, text: string, topicId?: string) =>
      msg({
        chatType: "group",
        peerId,
        senderId: "u5",
        text,
        wasMentioned: true,
        ...(topicId ? { topicId } : {}),
      });
    const r = await handleAndWait(app, group("g-a", "hi"));
    const spawned = await app.invoke(r.sessionKey as string, "sessions_spawn", {
      task: "work",
      thread: true,
    });
    expect(spawned).toMatchObject({ status: "accepted" });
    const threadId = ch.threads[0]?.threadId as string;
    expect(threadId).toBeDefined();
    // Telegram topic ids count per chat: topic <threadId> of another forum is another conversation.
    const other = await handleAndWait(app, group("g-b", "elsewhere", threadId));
    expect(other.sessionKey).toBe(`agent:main:memory:group:g-b:topic:${threadId}`);
    // In the chat the thread was created in, the topic reaches the child.
    const inThread = await handleAndWait(app, group("g-a", "follow-up", threadId));
    expect(inThread.sessionKey).toBe(spawned.childSessionKey);
  });

  it("sessions_spawn thread: true follows channels.discord.threadBindings.enabled over session.threadBindings.enabled", async () => {
    const spawnInDiscord = async (config: Partial<ConfigInput>) => {
      const { t: app } = await setup(config);
      const discord = new MemoryChannel("discord", "default");
      (app.app.services.channels as unknown as { add(a: MemoryChannel): void }).add(discord);
      const r = await handleAndWait(
        app,
        msg({ channel: "discord", chatType: "channel", peerId: "c1", text: "hi", wasMentioned: true }),
      );
      const res = await app.invoke(r.sessionKey as string, "sessions_spawn", { task: "work", thread: true });
      return { app, discord, res };
    };
    // Off for Discord: refused, no thread created, no binding left behind.
    const off = await spawnInDiscord({
      channels: { discord: { accounts: {}, dmPolicy: "open", threadBindings: { enabled: false } } },
    });
    expect(off.res).toMatchObject({
      status: "error",
      error: expect.stringContaining("channels.discord.threadBindings.enabled"),
    });
    expect(off.discord.threads).toEqual([]);
    expect(await off.app.app.services.store.kv.list(THREAD_BINDINGS_NS)).toEqual([]);
    await off.app.stop();
    t = undefined;
    // Off globally but on for Discord: the thread is created and bound.
    const on = await spawnInDiscord({
      session: { threadBindings: { enabled: false } },
      channels: { discord: { accounts: {}, dmPolicy: "open", threadBindings: { enabled: true } } },
    });
    expect(on.res).toMatchObject({ status: "accepted", mode: "session" });
    expect(on.discord.threads).toHaveLength(1);
    const bound = await on.app.app.services.store.kv.get<{ sessionKey: string }>(
      THREAD_BINDINGS_NS,
      threadBindingKey("discord", "default", "c1", on.discord.threads[0]?.threadId as string),
    );
    expect(bound?.sessionKey).toBe(on.res.childSessionKey);
  });

  it("a binding stored under the key without the chat still routes, only in its own chat", async () => {
    const { t: app } = await setup();
    const child = "agent:main:subagent:2b6f0c1e-5d4a-4e8b-9f3c-1a2b3c4d5e6f";
    await putChild(app, child, "agent:main:memory:group:g-a", {
      threadBinding: { channel: "memory", accountId: "default", to: "g-a", threadId: "9", boundAt: clock },
    });
    await app.app.services.store.kv.set(THREAD_BINDINGS_NS, "memory:default:9", {
      sessionKey: child,
      boundAt: clock,
    });
    const topic = (peerId: string) =>
      msg({ chatType: "group", peerId, senderId: "u5", topicId: "9", text: "x", wasMentioned: true });
    expect((await handleAndWait(app, topic("g-b"))).sessionKey).toBe("agent:main:memory:group:g-b:topic:9");
    expect((await handleAndWait(app, topic("g-a"))).sessionKey).toBe(child);
  });

  it("route follow-ups to the bound child until idle or too old, honouring per-channel settings", async () => {
    const { t: app } = await setup({
      session: { threadBindings: { enabled: true, idleHours: 1, maxAgeHours: 0 } },
      channels: { discord: { accounts: {}, threadBindings: { maxAgeHours: 5 } } },
    });
    const child = "agent:main:subagent:7d1f1b7e-3f0a-4b2c-9c1e-0c7a1b2c3d4e";
    await putChild(app, child, "agent:main:discord:channel:c1");
    await app.app.services.store.kv.set(
      THREAD_BINDINGS_NS,
      threadBindingKey("discord", "default", "c1", "T1"),
      {
        sessionKey: child,
        boundAt: clock,
      },
    );
    const inThread = (text: string) =>
      msg({
        channel: "discord",
        chatType: "channel",
        peerId: "c1",
        parentPeerId: "c1",
        threadId: "T1",
        text,
      });
    // No mention needed inside a bound thread.
    expect((await handleAndWait(app, inThread("follow-up"))).sessionKey).toBe(child);
    // Idle for more than idleHours: the binding ends, the thread gets its ordinary session (and needs a mention).
    clock += 2 * 3600_000;
    const after = await app.app.router.handle(inThread("later"));
    expect(after).toMatchObject({ accepted: false, dropped: "not-mentioned" });
    expect(
      await app.app.services.store.kv.get(
        THREAD_BINDINGS_NS,
        threadBindingKey("discord", "default", "c1", "T1"),
      ),
    ).toBeNull();
  });
});
