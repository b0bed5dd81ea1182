import { afterEach, describe, expect, it } from "vitest";
import type { ChannelCapabilities } from "../../src/channels/types.js";
import { ensureSession } from "../../src/sessions/service.js";
import type { SessionStore } from "../../src/store/types.js";
import { attachChannel, plainMemoryChannel, startTestApp, type TestApp } from "../harness.js";

/**
 * Issue 46: one turn reads its session row once — the agent's turn reads it and hands the row down
 * to the typing indicator, the streamed preview, the reply's delivery and the runtime (it used to
 * be read three or four times: ensureSession's update and get, typing, the preview, the delivery).
 * Counted on the store itself (fs + local pipeline) over one delivered turn of a warm session.
 */

const CHAT = "agent:main:memory:direct:u1";
let t: TestApp | null = null;
afterEach(async () => {
  await t?.stop();
  t = null;
});

/** Counts the session store's reads of `key` (get, getBySessionId, and update, which reads before it writes). */
function countReads(sessions: SessionStore, key: string): { reads: string[] } {
  const out = { reads: [] as string[] };
  const s = sessions as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of ["get", "update", "getBySessionId"]) {
    const real = s[name]?.bind(sessions);
    if (!real) continue;
    s[name] = (...args: unknown[]) => {
      if (args[0] === key) out.reads.push(name);
      return real(...args);
    };
  }
  return out;
}

async function oneTurn(caps: Partial<ChannelCapabilities>) {
  t = await startTestApp({
    models: {
      default: "s/echo",
      providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "re: $1" }] } },
    },
  });
  const channel = await attachChannel(t, plainMemoryChannel({ typing: true, ...caps }));
  const services = t.app.services;
  await ensureSession(services, CHAT, { agentId: "main" });
  await services.store.sessions.patch(CHAT, {
    deliveryContext: { channel: "memory", to: "chat-1", accountId: "default" },
  });
  const counted = countReads(services.store.sessions, CHAT);
  const run = await services.pipeline.submitTurn({
    sessionKey: CHAT,
    agentId: "main",
    text: "hello",
    deliver: true,
    origin: "operator",
  });
  const rec = await services.pipeline.wait(run.runId, 10_000);
  expect(rec).toMatchObject({ status: "ok", reply: "re: hello" });
  return { reads: counted.reads, channel };
}

describe("one session read per turn", () => {
  it("a delivered reply (typing, then the reply posted): the session is read once", {
    timeout: 30_000,
  }, async () => {
    const { reads, channel } = await oneTurn({});
    expect(channel.typing).toEqual([{ to: "chat-1" }]);
    expect(channel.sent.map((m) => m.text)).toEqual(["re: hello"]);
    expect(reads).toEqual(["get"]);
  });

  it("a streamed reply (typing, the preview, its final edit): the session is read once", {
    timeout: 30_000,
  }, async () => {
    const { reads, channel } = await oneTurn({ streaming: { editIntervalMs: 10, groupEditIntervalMs: 10 } });
    expect(channel.typing).toEqual([{ to: "chat-1" }]);
    const shown = [...channel.sent.map((m) => m.text), ...channel.edits.map((e) => e.text)];
    expect(shown.at(-1)).toBe("re: hello");
    expect(reads).toEqual(["get"]);
  });
});
