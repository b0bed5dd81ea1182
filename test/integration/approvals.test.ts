import { afterEach, describe, expect, it } from "vitest";
import { metricsText } from "../../src/telemetry/index.js";
import {
  attachRouted,
  startApprovalsApp,
  APPROVAL_TARGET as TARGET,
  userMessages,
} from "../approvals-fixture.js";
import type { MemoryChannel } from "../fakes/memory-channel.js";
import { cliAgainst, plainMemoryChannel, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { seedSession } from "./tools/seed-sessions.js";

/**
 * Approvals end to end on the in-process gateway (API.md §8.3): an `ask` rule pauses the run
 * (`waiting`, `waitingFor`), the request reaches the chat with three buttons (or a numbered text),
 * only an approver's press decides, the first decision wins, the tool runs once and the model goes
 * on; deny, timeout and a deny rule answer `{ status: "denied", reason }`.
 */

let t: TestApp | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

const CHAT = "agent:main:chat";

async function setUp(
  approvals: Record<string, unknown> = {},
  caps: Partial<MemoryChannel["capabilities"]> = { buttons: true },
  listen = false,
): Promise<{ app: TestApp; channel: MemoryChannel }> {
  const app = await startApprovalsApp(
    {},
    { listen, approvals: { approvers: ["memory:boss"], ...approvals } },
  );
  t = app;
  const channel = await attachRouted(app, plainMemoryChannel(caps));
  await seedSession(app, CHAT, {
    deliveryContext: { channel: "memory", to: "chat-1", accountId: "default" },
  });
  return { app, channel };
}

const targetMessages = (app: TestApp) => userMessages(app.rpc);

async function pendingOne(app: TestApp) {
  const list = await eventually(async () => {
    const r = await app.rpc("approvals.list", {});
    return r.result.approvals.length > 0 ? r.result.approvals : null;
  });
  expect(list).toHaveLength(1);
  return list[0] as { id: string; runId: string; tool: string; args: Record<string, unknown> };
}

/** `switchboard_approvals_pending` as a scrape of this process reads it. */
async function pendingGauge(): Promise<number> {
  const { body } = await metricsText();
  const m = /^switchboard_approvals_pending (\S+)$/m.exec(body);
  return m ? Number(m[1]) : Number.NaN;
}

async function send(app: TestApp, message: string): Promise<string> {
  const r = await app.rpc("chat.send", { sessionKey: CHAT, message, timeoutSeconds: 0 });
  expect(r.ok).toBe(true);
  return r.result.runId as string;
}

describe("approvals: ask → wait → decide", () => {
  it("pauses the run, asks with buttons, lets only an approver decide once, then runs the tool once", async () => {
    const { app, channel } = await setUp();
    const events: Array<{ e: string; d: unknown }> = [];
    app.app.services.bus.onAny((e, d) => {
      if (e.startsWith("approval.")) events.push({ e, d });
    });
    const runId = await send(app, "ping hello");
    const ap = await pendingOne(app);
    expect(ap).toMatchObject({
      runId,
      tool: "sessions_send",
      args: { sessionKey: TARGET, message: "hello" },
    });
    expect(ap.id).toMatch(/^ap_[0-9a-f]{20}$/);

    const run = await app.rpc("runs.get", { runId });
    expect(run.result).toMatchObject({
      status: "waiting",
      waitingFor: { approvalId: ap.id, tool: "sessions_send", args: { message: "hello" } },
    });
    // agent.wait does not take a waiting run for a finished one
    expect((await app.rpc("agent.wait", { runId, timeoutMs: 50 })).result.status).toBe("running");

    const request = await eventually(() => channel.sent.find((m) => m.text.includes(ap.id)));
    expect(request.to).toBe("chat-1");
    expect(request.text).toContain("sessions_send");
    expect(request.actions?.map((a) => a.id)).toEqual([
      `ap:${ap.id}:once`,
      `ap:${ap.id}:always`,
      `ap:${ap.id}:deny`,
    ]);
    expect(request.text).not.toContain("Reply 1");
    const messageId = "1";

    // a stranger, a forged id and another chat change nothing
    expect(
      (await channel.press({ actionId: `ap:${ap.id}:once`, messageId, peerId: "chat-1", senderId: "eve" }))
        .notice,
    ).toMatch(/not yours/i);
    expect(
      (await channel.press({ actionId: `ap:${ap.id}:hack`, messageId, peerId: "chat-1", senderId: "boss" }))
        .notice,
    ).toMatch(/not one of ours/i);
    expect(
      (
        await channel.press({
          actionId: `ap:ap_00000000000000000000:once`,
          messageId,
          peerId: "chat-1",
          senderId: "boss",
        })
      ).notice,
    ).toMatch(/unknown/i);
    expect(
      (await channel.press({ actionId: `ap:${ap.id}:once`, messageId, peerId: "chat-2", senderId: "boss" }))
        .notice,
    ).toMatch(/another chat/i);
    expect((await app.rpc("runs.get", { runId })).result.status).toBe("waiting");
    expect(await targetMessages(app)).toEqual([]);

    // the approver's double press: the first counts, the second is told
    const [a, b] = await Promise.all([
      channel.press({ actionId: `ap:${ap.id}:once`, messageId, peerId: "chat-1", senderId: "boss" }),
      channel.press({ actionId: `ap:${ap.id}:once`, messageId, peerId: "chat-1", senderId: "boss" }),
    ]);
    expect([a.notice, b.notice].sort()).toEqual(
      ["Allowed once.", expect.stringMatching(/already decided/)].sort(),
    );
    const done = await app.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result).toMatchObject({ status: "ok" });
    expect(done.result.reply).toContain("done:");
    expect(await targetMessages(app)).toEqual(["hello"]);
    const after = await app.rpc("runs.get", { runId });
    expect(after.result.waitingFor).toBeUndefined();

    // the request now says who decided, without buttons
    const edit = await eventually(() =>
      channel.edits.find((e) => e.text.includes("Allowed once by memory:boss")),
    );
    expect(edit.messageId).toBe(messageId);
    expect(edit.actions).toEqual([]);
    expect((await app.rpc("approvals.list", {})).result.approvals).toEqual([]);
    // a late press and a late RPC are refused
    expect(
      (await channel.press({ actionId: `ap:${ap.id}:deny`, messageId, peerId: "chat-1", senderId: "boss" }))
        .notice,
    ).toMatch(/already decided/);
    const late = await app.rpc("approvals.resolve", { id: ap.id, decision: "deny" });
    expect(late.error?.code).toBe("CONFLICT");
    expect(events.map((x) => x.e)).toEqual(["approval.requested", "approval.resolved"]);
    expect(events[1]?.d).toMatchObject({
      id: ap.id,
      sessionKey: CHAT,
      runId,
      tool: "sessions_send",
      decision: "allow-once",
    });
  });

  it("deny: the model gets { status: denied, reason: denied } and nothing runs", async () => {
    const { app, channel } = await setUp();
    const runId = await send(app, "ping nope");
    const ap = await pendingOne(app);
    expect(
      (
        await channel.press({
          actionId: `ap:${ap.id}:deny`,
          messageId: "1",
          peerId: "chat-1",
          senderId: "boss",
        })
      ).notice,
    ).toBe("Denied.");
    const done = await app.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result.reply).toContain('"status":"denied"');
    expect(done.result.reply).toContain('"reason":"denied"');
    expect(await targetMessages(app)).toEqual([]);
  });

  it("timeout: unanswered → { status: denied, reason: timeout }; a press after it changes nothing", async () => {
    const { app, channel } = await setUp({ timeoutSeconds: 1 });
    const resolved: unknown[] = [];
    app.app.services.bus.on("approval.resolved", (d) => resolved.push(d));
    const runId = await send(app, "ping late");
    const ap = await pendingOne(app);
    const done = await app.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result.reply).toContain('"reason":"timeout"');
    // a timeout is nobody's decision: the event names no decision (API.md §8.3 lists three), only why
    expect(resolved).toEqual([expect.objectContaining({ id: ap.id, reason: "timeout" })]);
    expect(resolved[0]).not.toHaveProperty("decision");
    expect(
      (
        await channel.press({
          actionId: `ap:${ap.id}:once`,
          messageId: "1",
          peerId: "chat-1",
          senderId: "boss",
        })
      ).notice,
    ).toMatch(/already decided|expired/);
    expect(await targetMessages(app)).toEqual([]);
  });

  it("a deny rule refuses at once with reason rule; no request is posted", async () => {
    const { app, channel } = await setUp({ rules: [{ tool: "sessions_*", action: "deny" }] });
    const runId = await send(app, "ping x");
    const done = await app.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result.reply).toContain('"reason":"rule"');
    expect(channel.sent).toEqual([]);
    expect((await app.rpc("approvals.list", {})).result.approvals).toEqual([]);
  });

  it("argument globs pick the calls that ask", async () => {
    const { app } = await setUp({
      rules: [{ tool: "sessions_send", action: "ask", args: { message: "secret*" } }],
    });
    const runId = await send(app, "ping public");
    expect((await app.rpc("agent.wait", { runId, timeoutMs: 10_000 })).result.status).toBe("ok");
    expect(await targetMessages(app)).toEqual(["public"]);
    const secret = await send(app, "ping secret-plan");
    const ap = await pendingOne(app);
    expect(ap.args.message).toBe("secret-plan");
    await app.rpc("approvals.resolve", { id: ap.id, decision: "deny" });
    expect((await app.rpc("agent.wait", { runId: secret, timeoutMs: 10_000 })).result.status).toBe("ok");
  });

  it("allow-always is stored per (agent, tool), shown by approvals.list, and later calls run unasked", async () => {
    const { app, channel } = await setUp();
    const first = await send(app, "ping one");
    const ap = await pendingOne(app);
    expect(
      (
        await channel.press({
          actionId: `ap:${ap.id}:always`,
          messageId: "1",
          peerId: "chat-1",
          senderId: "boss",
        })
      ).notice,
    ).toMatch(/Allowed/);
    await app.rpc("agent.wait", { runId: first, timeoutMs: 10_000 });
    const list = await app.rpc("approvals.list", {});
    expect(list.result.always).toEqual([
      expect.objectContaining({ agentId: "main", tool: "sessions_send", decidedBy: "memory:boss" }),
    ]);
    const second = await send(app, "ping two");
    expect((await app.rpc("agent.wait", { runId: second, timeoutMs: 10_000 })).result.status).toBe("ok");
    expect(await targetMessages(app)).toEqual(["one", "two"]);
    expect(channel.sent.filter((m) => m.text.startsWith("Approval needed"))).toHaveLength(1);
  });

  it("/approve works from any chat for an approver; a stranger's /approve is refused", async () => {
    const { app, channel } = await setUp();
    const runId = await send(app, "ping cmd");
    const ap = await pendingOne(app);
    await channel.inject({ text: `/approve ${ap.id} allow-once`, peerId: "chat-1", senderId: "eve" });
    expect(await targetMessages(app)).toEqual([]);
    expect((await app.rpc("runs.get", { runId })).result.status).toBe("waiting");
    await channel.inject({ text: `/approve ${ap.id} allow-once`, peerId: "boss", senderId: "boss" });
    expect((await app.rpc("agent.wait", { runId, timeoutMs: 10_000 })).result.status).toBe("ok");
    expect(await targetMessages(app)).toEqual(["cmd"]);
    expect(channel.texts()).toContain("Allowed once.");
  });

  it("without buttons the request is a numbered text and a reply of 1/2/3 decides", async () => {
    const { app, channel } = await setUp({}, { buttons: false });
    const runId = await send(app, "ping num");
    const ap = await pendingOne(app);
    const request = await eventually(() => channel.sent.find((m) => m.text.includes(ap.id)));
    expect(request.actions).toBeUndefined();
    expect(request.text).toContain("Reply 1 to allow once, 2 to allow always, 3 to deny");
    await channel.inject({ text: "3", peerId: "chat-1", senderId: "boss" });
    const done = await app.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result.reply).toContain('"reason":"denied"');
    // with nothing pending, "1" is an ordinary message for the agent
    const plain = await send(app, "1");
    expect((await app.rpc("agent.wait", { runId: plain, timeoutMs: 10_000 })).result.reply).toBe("ok");
  });

  it("approvals.resolve (operator) decides; bad params name the field", async () => {
    const { app } = await setUp();
    const runId = await send(app, "ping rpc");
    const ap = await pendingOne(app);
    expect(await pendingGauge()).toBe(1);
    const bad = await app.rpc("approvals.resolve", { id: ap.id, decision: "maybe" });
    expect(bad.error?.code).toBe("INVALID_PARAMS");
    expect(bad.error?.message).toContain("decision");
    expect((await app.rpc("approvals.resolve", { id: "ap_nope", decision: "deny" })).error?.code).toBe(
      "NOT_FOUND",
    );
    expect((await app.rpc("approvals.list", { sessionKey: "agent:main:other" })).result.approvals).toEqual(
      [],
    );
    expect((await app.rpc("approvals.resolve", { id: ap.id, decision: "allow-once" })).result).toEqual({
      ok: true,
    });
    expect(await pendingGauge()).toBe(0);
    expect((await app.rpc("agent.wait", { runId, timeoutMs: 10_000 })).result.status).toBe("ok");
    expect(await targetMessages(app)).toEqual(["rpc"]);
  });

  it("the CLI lists, approves and denies", async () => {
    const { app } = await setUp({}, { buttons: true }, true);
    const first = await send(app, "ping cli");
    const ap = await pendingOne(app);
    const listed = await cliAgainst(app, "approvals", "list");
    expect(listed.code).toBe(0);
    expect(listed.out).toContain(ap.id);
    expect(listed.out).toContain("sessions_send");
    const ok = await cliAgainst(app, "approvals", "approve", ap.id);
    expect(ok).toMatchObject({ code: 0, out: `allowed once: ${ap.id}` });
    expect((await app.rpc("agent.wait", { runId: first, timeoutMs: 10_000 })).result.status).toBe("ok");
    const again = await cliAgainst(app, "approvals", "deny", ap.id);
    expect(again.code).not.toBe(0);
    expect(again.err).toMatch(/already decided/);
    const second = await send(app, "ping cli2");
    const ap2 = await eventually(async () => {
      const r = await app.rpc("approvals.list", {});
      return r.result.approvals.find((a: { id: string }) => a.id !== ap.id);
    });
    expect((await cliAgainst(app, "approvals", "deny", ap2.id, "--json")).out).toContain('"ok": true');
    expect((await app.rpc("agent.wait", { runId: second, timeoutMs: 10_000 })).result.reply).toContain(
      '"reason":"denied"',
    );
    expect(await targetMessages(app)).toEqual(["cli"]);
  });
});
