import { afterEach, expect, it, vi } from "vitest";
import { AUDIENCE_TTL_MS, LiveRelay } from "../../../src/app/live-relay.js";
import { EventBus } from "../../../src/events.js";
import { silentLogger } from "../../../src/log.js";
import { randomPrefix } from "../../helpers.js";
import { describeRedis, newRedisClient } from "../../redis.js";

describeRedis("live event relay (real Redis pub/sub)", () => {
  const relays: LiveRelay[] = [];
  const clients: Array<ReturnType<typeof newRedisClient>> = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(relays.splice(0).map((r) => r.stop()));
    await Promise.all(clients.splice(0).map((c) => c.quit()));
  });

  function relay(channel: string): { bus: EventBus; relay: LiveRelay } {
    const publisher = newRedisClient();
    clients.push(publisher);
    const r = new LiveRelay({
      publisher,
      createSubscriber: newRedisClient,
      channel,
      audienceKey: `${channel}:audience`,
      logger: silentLogger(),
    });
    relays.push(r);
    return { bus: new EventBus(), relay: r };
  }

  it("carries events to the other processes, and drops its own before parsing them", async () => {
    const channel = `${randomPrefix("relay")}:live`;
    const a = relay(channel);
    const b = relay(channel);
    await a.relay.start(a.bus, true);
    await b.relay.start(b.bus, true);
    a.relay.listening(true);
    b.relay.listening(true);
    const onA: unknown[] = [];
    const onB: unknown[] = [];
    a.bus.onAny((event, data) => onA.push({ event, data }));
    b.bus.onAny((event, data) => onB.push({ event, data }));
    const parse = vi.spyOn(JSON, "parse");

    const data = { sessionKey: "agent:main:main", runId: "r1", text: "hello" };
    a.bus.emit("run.delta", data as never);
    await vi.waitFor(() => expect(onB).toEqual([{ event: "run.delta", data }]), { timeout: 5000 });
    // b parsed a's message; a got it back from Redis too (it subscribes to the same channel) but never parsed it
    await new Promise((r) => setTimeout(r, 100));
    const relayedParses = parse.mock.calls.filter(([raw]) => String(raw).startsWith('{"from":'));
    expect(relayedParses).toHaveLength(1);
    expect(onA).toEqual([{ event: "run.delta", data }]); // its own emit, not a second copy
  });

  it("counts as a run.delta watcher for every session but the quiet ones, while it runs", async () => {
    const a = relay(`${randomPrefix("relay")}:live`);
    expect(a.bus.watched("run.delta", "agent:main:x")).toBe(false);
    await a.relay.start(a.bus, false);
    expect(a.bus.watched("run.delta", "agent:main:x")).toBe(true);
    const loud = a.relay.quiet("agent:main:x");
    const again = a.relay.quiet("agent:main:x"); // nested turns of one session
    expect(a.bus.watched("run.delta", "agent:main:x")).toBe(false); // no audience: the turn need not stream
    expect(a.bus.watched("run.delta", "agent:main:y")).toBe(true);
    loud();
    loud(); // a second release is a no-op
    expect(a.bus.watched("run.delta", "agent:main:x")).toBe(false);
    again();
    expect(a.bus.watched("run.delta", "agent:main:x")).toBe(true);
    await a.relay.stop();
    expect(a.bus.watched("run.delta", "agent:main:y")).toBe(false);
  });

  it("re-emits only while its gateway has /ws clients; membership is in the audience zset", async () => {
    const channel = `${randomPrefix("relay")}:live`;
    const audience = `${channel}:audience`;
    const a = relay(channel);
    const b = relay(channel);
    await a.relay.start(a.bus, false); // a worker: publishes, never re-emits
    await b.relay.start(b.bus, true);
    const onB: unknown[] = [];
    b.bus.onAny((event, data) => onB.push({ event, data }));
    const redis = newRedisClient();
    clients.push(redis);

    // no /ws client on b: nothing to show the events to
    a.bus.emit("run.delta", { sessionKey: "agent:main:x", runId: "r0", text: "unseen" });
    await new Promise((r) => setTimeout(r, 150));
    expect(onB).toEqual([]);
    expect(await redis.zscore(audience, b.relay.member)).toBeNull();

    const before = Date.now();
    b.relay.listening(true);
    await vi.waitFor(async () => expect(await redis.zscore(audience, b.relay.member)).not.toBeNull());
    const expiry = Number(await redis.zscore(audience, b.relay.member));
    expect(expiry).toBeGreaterThanOrEqual(before + AUDIENCE_TTL_MS);
    expect(expiry).toBeLessThanOrEqual(Date.now() + AUDIENCE_TTL_MS);
    expect(await redis.pttl(audience)).toBeGreaterThan(0); // the zset itself goes if every gateway dies
    const data = { sessionKey: "agent:main:x", runId: "r1", text: "seen" };
    a.bus.emit("run.delta", data as never);
    await vi.waitFor(() => expect(onB).toEqual([{ event: "run.delta", data }]), { timeout: 5000 });

    b.relay.listening(false);
    await vi.waitFor(async () => expect(await redis.zscore(audience, b.relay.member)).toBeNull());
    a.bus.emit("run.delta", { sessionKey: "agent:main:x", runId: "r2", text: "unseen" });
    await new Promise((r) => setTimeout(r, 150));
    expect(onB).toHaveLength(1);
  });

  it("publishes nothing for a quiet session, and everything else as before", async () => {
    const channel = `${randomPrefix("relay")}:live`;
    const a = relay(channel);
    const b = relay(channel);
    await a.relay.start(a.bus, false);
    await b.relay.start(b.bus, true);
    b.relay.listening(true);
    const onB: Array<{ event: string; data: unknown }> = [];
    b.bus.onAny((event, data) => onB.push({ event, data }));
    const quietKey = "agent:main:quiet";
    const release = a.relay.quiet(quietKey);
    const nested = a.relay.quiet(quietKey);
    a.bus.emit("run.typing", { sessionKey: quietKey, runId: "q", on: true });
    a.bus.emit("session.updated", { entry: { key: quietKey } as never });
    a.bus.emit("message.appended", { sessionKey: quietKey, message: { id: "m" } as never });
    a.bus.emit("run.delta", { sessionKey: "agent:main:loud", runId: "l", text: "loud" });
    await vi.waitFor(() => expect(onB).toHaveLength(1), { timeout: 5000 });
    expect(onB[0]?.event).toBe("run.delta");
    release();
    release(); // a second call does not release the nested quiet
    a.bus.emit("run.delta", { sessionKey: quietKey, runId: "q", text: "still quiet" });
    nested();
    a.bus.emit("session.updated", { entry: { key: quietKey } as never });
    await vi.waitFor(() => expect(onB).toHaveLength(2), { timeout: 5000 });
    await new Promise((r) => setTimeout(r, 100));
    expect(onB.map((e) => e.event)).toEqual(["run.delta", "session.updated"]);
  });
});
