import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { describeRedis, ownRedis } from "../redis.js";

/**
 * Redis goes away under a running gateway (redis store + bullmq queue): RPC answers UNAVAILABLE
 * instead of hanging or failing with INTERNAL, health says so, inbound messages are not accepted
 * (so adapters hold their acknowledgement), and everything recovers by itself when Redis is back.
 */

describeRedis("gateway during a Redis outage", () => {
  let redis: Awaited<ReturnType<typeof ownRedis>>;
  let t: TestApp;

  beforeAll(async () => {
    redis = await ownRedis();
    t = await startTestApp({
      storage: { driver: "redis", redisUrl: redis.url, prefix: "outage" },
      queue: {
        driver: "bullmq",
        redisUrl: redis.url,
        prefix: "outage",
        lockDurationMs: 1000,
        stalledIntervalMs: 1000,
      },
    });
  }, 30_000);

  afterAll(async () => {
    await t?.stop();
    await redis?.cleanup();
  }, 30_000);

  it("answers UNAVAILABLE while Redis is down and recovers without a restart", {
    timeout: 60_000,
  }, async () => {
    const before = await t.rpc("chat.send", { sessionKey: "main", message: "before", timeoutSeconds: 20 });
    expect(before.result).toMatchObject({ status: "ok" });

    await redis.kill();
    const list = await t.rpc("sessions.list", {});
    expect(list.ok).toBe(false);
    expect(list.error?.code).toBe("UNAVAILABLE");
    const send = await t.rpc("chat.send", { sessionKey: "main", message: "during", timeoutSeconds: 0 });
    expect(send.error?.code).toBe("UNAVAILABLE");
    const health = await t.rpc("health", {});
    expect(health.result).toMatchObject({ redis: "unavailable" });
    await expect(
      t.app.router.handle({
        channel: "memory",
        accountId: "default",
        chatType: "direct",
        peerId: "u1",
        senderId: "u1",
        text: "inbound while down",
        messageId: "x1",
        wasMentioned: false,
        replyToBot: false,
        media: [],
      }),
    ).rejects.toMatchObject({ code: "UNAVAILABLE" });

    // every method that touches Redis answers UNAVAILABLE (never INTERNAL) while it is down
    const codes = await sweep(t, before.result.runId);
    expect(codes.filter((c) => c.code === "INTERNAL")).toEqual([]);
    expect(codes.filter((c) => c.code === "UNAVAILABLE").length).toBeGreaterThan(5);

    await redis.start();
    // and while it comes back (loading its AOF, reconnecting)
    const during = await sweep(t, before.result.runId);
    expect(during.filter((c) => c.code === "INTERNAL")).toEqual([]);
    await eventually(async () => (await t.rpc("health", {})).result?.redis === "ready", 400, 50);
    const after = await eventually(
      async () => {
        const r = await t.rpc("chat.send", { sessionKey: "main", message: "after", timeoutSeconds: 20 });
        return r.ok && r.result.status === "ok" ? r : null;
      },
      100,
      200,
    );
    expect(after.result.reply).toContain("after");
    // What was accepted before the outage survived it (AOF).
    const hist = await t.rpc("sessions.history", { sessionKey: "main" });
    expect(hist.result.messages.map((m: { content: string }) => m.content)).toEqual(
      expect.arrayContaining(["before", "after"]),
    );
  });
});

/** Calls every Redis-backed RPC method once; returns the error code of each failure. */
async function sweep(t: TestApp, runId: string): Promise<Array<{ method: string; code: string }>> {
  const calls: Array<[string, Record<string, unknown>]> = [
    ["sessions.list", {}],
    ["sessions.history", { sessionKey: "main" }],
    ["sessions.patch", { sessionKey: "main", label: "x" }],
    ["sessions.delete", { sessionKey: "agent:main:gone" }],
    ["chat.send", { sessionKey: "main", message: "during", timeoutSeconds: 0 }],
    ["chat.send", { sessionKey: "main", message: "during", timeoutSeconds: 1 }],
    ["runs.get", { runId }],
    ["agent.wait", { runId: "nope", timeoutMs: 100 }],
    ["tools.invoke", { sessionKey: "main", tool: "sessions_list", args: {} }],
    ["tools.invoke", { sessionKey: "main", tool: "sessions_history", args: { sessionKey: "main" } }],
    [
      "tools.invoke",
      {
        sessionKey: "main",
        tool: "sessions_send",
        args: { sessionKey: "main", message: "x", timeoutSeconds: 0 },
      },
    ],
    ["tools.invoke", { sessionKey: "main", tool: "sessions_spawn", args: { task: "x" } }],
    ["tools.invoke", { sessionKey: "main", tool: "session_status", args: {} }],
    ["tools.invoke", { sessionKey: "main", tool: "subagents", args: { action: "list" } }],
    ["cron.list", {}],
  ];
  const out: Array<{ method: string; code: string }> = [];
  for (const [method, params] of calls) {
    const r = await t.rpc(method, params);
    if (!r.ok) out.push({ method: `${method} ${JSON.stringify(params).slice(0, 60)}`, code: r.error!.code });
  }
  return out;
}
