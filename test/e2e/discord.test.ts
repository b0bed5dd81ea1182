import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeDiscord, type FakeDiscordUser } from "../fakes/discord.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * The whole gateway with discord.js against the loopback Discord fake: DMs, mention gating,
 * thread sessions, and thread-bound sub-agents (sessions_spawn { thread: true }).
 */

let dc: FakeDiscord;
let t: TestApp;
let alice: FakeDiscordUser;

beforeAll(async () => {
  dc = await FakeDiscord.start();
  alice = dc.addUser("alice");
  t = await startTestApp(
    {
      models: {
        default: "s/rules",
        providers: {
          s: {
            kind: "scripted",
            rules: [
              {
                match: "research (.+)$",
                toolCalls: [
                  { name: "sessions_spawn", args: { task: "$1", thread: true, label: "research" } },
                ],
                afterTools: "on it",
              },
              { match: "\\[Subagent Task\\]: (.+)$", reply: "findings about $1" },
              { match: "^followup (.+)$", reply: "child heard: $1" },
            ],
          },
        },
      },
      tools: { profile: "full" },
      channels: {
        discord: {
          accounts: { default: { token: dc.token, apiUrl: dc.apiUrl, gatewayUrl: dc.gatewayUrl } },
          allowFrom: ["*"],
        },
      },
    },
    { listen: true },
  );
});

afterAll(async () => {
  await t?.stop();
  await dc?.close();
});

const sentTo = (channelId: string) =>
  dc.sentTo().filter((m) => m.to === channelId || m.threadId === channelId);

describe("discord through the gateway", () => {
  it("a DM is answered", async () => {
    dc.dm(alice, "hello from a DM");
    const dm = dc.dmChannelOf(alice);
    const reply = await eventually(
      () => dc.sentTo().find((m) => m.text.includes("hello from a DM")),
      500,
      20,
    );
    expect([dm, alice.id]).toContain(reply.to);
    expect(reply.text).toContain("You said: hello from a DM");
  });

  it("a channel message needs a mention", async () => {
    dc.message(dc.textChannelId, alice, "just chatting");
    dc.message(dc.textChannelId, alice, `<@${dc.bot.id}> are you there`, { mentions: [dc.bot] });
    await eventually(() => sentTo(dc.textChannelId).find((m) => m.text.includes("are you there")), 500, 20);
    expect(sentTo(dc.textChannelId).some((m) => m.text.includes("just chatting"))).toBe(false);
  });

  it("a thread gets its own session", async () => {
    const thread = dc.openThread(dc.textChannelId, alice, "side talk");
    dc.message(thread, alice, `<@${dc.bot.id}> in the thread`, { mentions: [dc.bot] });
    await eventually(() => sentTo(thread).find((m) => m.text.includes("in the thread")), 500, 20);
    const key = `agent:main:discord:channel:${dc.textChannelId}:thread:${thread}`;
    expect(await t.app.services.store.sessions.get(key)).not.toBeNull();
  });

  it("sessions_spawn { thread: true } binds a thread: completion posted there, follow-ups reach the child", async () => {
    dc.message(dc.textChannelId, alice, `<@${dc.bot.id}> research tides`, { mentions: [dc.bot] });
    const threadCall = await eventually(
      () => dc.calls.find((c) => c.method === "POST" && /\/channels\/\d+\/threads$/.test(c.path)),
      500,
      20,
    );
    expect(threadCall).toBeDefined();
    // The child's key and its bound thread.
    const child = await eventually(
      async () => {
        const rows = await t.app.services.store.sessions.list({ limit: 50 });
        return rows.find((r) => r.key.includes(":subagent:") && r.threadBinding);
      },
      500,
      20,
    );
    const threadId = child.threadBinding!.threadId;
    const completion = await eventually(
      () => sentTo(threadId).find((m) => m.text.includes("findings about tides")),
      500,
      20,
    );
    expect(completion.text).toBeTruthy();

    // A follow-up inside the bound thread needs no mention and reaches the child session.
    dc.message(threadId, alice, "followup what about the moon");
    await eventually(
      () => sentTo(threadId).find((m) => m.text.includes("child heard: what about the moon")),
      500,
      20,
    );
    const hist = await t.rpc("sessions.history", { sessionKey: child.key });
    expect(
      hist.result.messages.some((m: { content: string }) =>
        String(m.content).includes("what about the moon"),
      ),
    ).toBe(true);

    // subagents list shows the binding.
    const list = await t.invoke(`agent:main:discord:channel:${dc.textChannelId}`, "subagents", {
      action: "list",
    });
    expect(JSON.stringify(list)).toContain(threadId);
  });
});
