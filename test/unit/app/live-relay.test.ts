import { afterEach, expect, it, vi } from "vitest";
import { LiveRelay } from "../../../src/app/live-relay.js";
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
    const r = new LiveRelay({ publisher, createSubscriber: newRedisClient, channel, logger: silentLogger() });
    relays.push(r);
    return { bus: new EventBus(), relay: r };
  }

  it("carries events to the other processes, and drops its own before parsing them", async () => {
    const channel = `${randomPrefix("relay")}:live`;
    const a = relay(channel);
    const b = relay(channel);
    await a.relay.start(a.bus, true);
    await b.relay.start(b.bus, true);
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
});
