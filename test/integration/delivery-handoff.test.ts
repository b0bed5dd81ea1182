import { afterAll, beforeAll, expect, it } from "vitest";
import type { AdapterRegistry } from "../../src/delivery/index.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * A `switchboard worker` runs turns but no channels: on bullmq its deliveries are handed to the
 * gateways (a durable BullMQ queue) and posted there, once per idempotency key. Before, a reply
 * of a turn a worker ran ended "no-route" and was never posted.
 */

describeRedis("deliveries from a worker are posted by a gateway", () => {
  const prefix = randomPrefix("handoff");
  const cfg = {
    storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
    queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix },
  };
  let gateway: TestApp;
  let worker: Awaited<ReturnType<typeof startTestWorker>>;
  const channel = new MemoryChannel();

  beforeAll(async () => {
    gateway = await startTestApp(cfg);
    (gateway.app.services.channels as AdapterRegistry).add(channel);
    await channel.start(async () => {});
    worker = await startTestWorker(cfg);
    const now = Date.now();
    await gateway.app.services.store.sessions.put({
      key: "agent:main:handoff",
      sessionId: "handoff-session",
      agentId: "main",
      createdAt: now,
      updatedAt: now,
      deliveryContext: { channel: "memory", to: "chat-h", accountId: "default" },
    });
  }, 30_000);

  afterAll(async () => {
    await worker?.stop();
    await gateway?.stop();
    await dropPrefix(prefix);
  });

  it("hands the reply to the gateway, which posts it once per key", { timeout: 30_000 }, async () => {
    const req = { sessionKey: "agent:main:handoff", text: "from the worker", idempotencyKey: "reply:r1#0" };
    expect(await worker.app.services.delivery.deliver(req)).toEqual({
      status: "handed-off",
      channel: "memory",
    });
    await eventually(() => channel.sent.some((m) => m.text === "from the worker"), 500, 10);
    // The same key again (a re-run turn): no second post.
    expect((await worker.app.services.delivery.deliver({ ...req, text: "again" })).status).toBe("handed-off");
    const other = { ...req, text: "second reply", idempotencyKey: "reply:r2#0" };
    await worker.app.services.delivery.deliver(other);
    await eventually(() => channel.sent.some((m) => m.text === "second reply"), 500, 10);
    expect(channel.sent.map((m) => m.text)).toEqual(["from the worker", "second reply"]);
    expect(channel.sent[0]).toMatchObject({ to: "chat-h" });
  });

  it("keeps a request's buttons across the hand-off (an approval asked on a worker)", {
    timeout: 30_000,
  }, async () => {
    const actions = [
      { id: "ap:x:once", label: "Allow once", style: "success" as const },
      { id: "ap:x:deny", label: "Deny", style: "danger" as const },
    ];
    const req = {
      sessionKey: "agent:main:handoff",
      text: "Approval needed",
      idempotencyKey: "approval:x#0",
      actions,
      actionsFallback: "Reply 1 or 3",
    };
    expect((await worker.app.services.delivery.deliver(req)).status).toBe("handed-off");
    const posted = await eventually(
      () => channel.sent.find((m) => m.text.startsWith("Approval needed")),
      500,
      10,
    );
    if (channel.capabilities.buttons) expect(posted.actions).toEqual(actions);
    else expect(posted.text).toContain("Reply 1 or 3");
  });

  it("a session without a chat is still no-route on the worker (nothing to hand off)", async () => {
    const now = Date.now();
    await gateway.app.services.store.sessions.put({
      key: "agent:main:nochat",
      sessionId: "nochat-session",
      agentId: "main",
      createdAt: now,
      updatedAt: now,
    });
    const res = await worker.app.services.delivery.deliver({
      sessionKey: "agent:main:nochat",
      text: "x",
      idempotencyKey: "reply:r3#0",
    });
    expect(res.status).toBe("no-route");
  });
});
