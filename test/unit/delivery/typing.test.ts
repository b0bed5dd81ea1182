import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/index.js";
import { AdapterRegistry } from "../../../src/delivery/index.js";
import { startTyping, type TypingDeps } from "../../../src/delivery/typing.js";
import { EventBus } from "../../../src/events.js";
import { silentLogger } from "../../../src/log.js";
import type { SessionEntry, StoreDriver } from "../../../src/store/types.js";
import { MemoryChannel } from "../../fakes/memory-channel.js";

/** The typing indicator built with only what it declares: bus, one store read, adapters, config, logger. */

const KEY = "agent:main:telegram:direct:u1";
const row: SessionEntry = {
  key: KEY,
  sessionId: "s1",
  agentId: "main",
  createdAt: 0,
  updatedAt: 0,
  deliveryContext: { channel: "telegram", to: "u1", threadId: "th" },
};

class StoppableChannel extends MemoryChannel {
  readonly stopped: string[] = [];
  async stopTyping(to: string): Promise<void> {
    this.stopped.push(to);
  }
}

function deps(channelConfig: Record<string, unknown> = {}) {
  const adapter = new StoppableChannel("telegram");
  const channels = new AdapterRegistry();
  channels.add(adapter);
  const bus = new EventBus();
  const events: Array<{ runId: string; on: boolean }> = [];
  bus.on("run.typing", (e) => events.push({ runId: e.runId, on: e.on }));
  const store = {
    sessions: { get: async (k: string) => (k === KEY ? row : null) },
  } as unknown as StoreDriver;
  const d: TypingDeps = {
    bus,
    store,
    channels,
    config: parseConfig({ agents: { list: [{ id: "main" }] }, channels: channelConfig }),
    logger: silentLogger(),
  };
  return { d, adapter, events };
}

describe("startTyping with narrow deps", () => {
  it("shows the indicator on the session's route, ends it once, and mirrors both on the bus", async () => {
    const { d, adapter, events } = deps();
    const stop = await startTyping(d, "r1", KEY, true);
    expect(adapter.typing).toEqual([{ to: "u1", threadId: "th" }]);
    await stop();
    await stop();
    expect(adapter.stopped).toEqual(["u1"]);
    expect(events).toEqual([
      { runId: "r1", on: true },
      { runId: "r1", on: false },
    ]);
  });

  it("channels.<name>.typing: false, or a turn that does not deliver, shows nothing in the chat", async () => {
    const off = deps({ telegram: { accounts: {}, typing: false } });
    await (await startTyping(off.d, "r2", KEY, true))();
    expect(off.adapter.typing).toEqual([]);
    expect(off.events.map((e) => e.on)).toEqual([true, false]);

    const quiet = deps();
    await (await startTyping(quiet.d, "r3", KEY, false))();
    expect(quiet.adapter.typing).toEqual([]);
    expect(quiet.adapter.stopped).toEqual([]);
  });
});
