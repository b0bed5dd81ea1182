import { describe, expect, it } from "vitest";
import { healthOf } from "../../../src/app/server.js";
import type { ChannelStatus } from "../../../src/channels/types.js";
import type { RedisConnections } from "../../../src/redis/connections.js";
import type { Services } from "../../../src/services/index.js";

/** `health` (API.md §4): `channels` is keyed by channel name; `accounts` keeps each account's state. */

function healthWith(
  adapters: { channel: string; accountId: string; state: ChannelStatus }[],
  leases?: Parameters<typeof healthOf>[3],
) {
  const services = {
    version: "1.2.3",
    store: { name: "fs", transcripts: { cacheStats: () => ({ maxChars: 0 }) } },
    pipeline: { driver: "local" },
    channels: {
      all: () =>
        adapters.map((a) => ({
          channel: a.channel,
          accountId: a.accountId,
          status: () => ({ state: a.state }),
        })),
    },
  } as unknown as Pick<Services, "version" | "store" | "pipeline" | "channels">;
  const redis = { status: async () => "n/a" } as unknown as RedisConnections;
  return healthOf(
    services,
    redis,
    { demo: false, defaultModel: "openai/gpt", circuits: async () => ({}) },
    leases,
  )();
}

describe("health", () => {
  it("names each channel by its name, with its least healthy account's state", async () => {
    const h = await healthWith([
      { channel: "webchat", accountId: "default", state: "connected" },
      { channel: "telegram", accountId: "default", state: "connected" },
      { channel: "telegram", accountId: "work", state: "reconnecting" },
      { channel: "whatsapp", accountId: "default", state: "needs-login" },
    ]);
    expect(h).toMatchObject({ ok: true, version: "1.2.3", storage: "fs", queue: "local" });
    // embedded mode (no leases): API.md §4's `channels: { name: status }`
    expect(h.channels).toEqual({ webchat: "connected", telegram: "reconnecting", whatsapp: "needs-login" });
    expect(h.accounts).toEqual({
      "webchat:default": "connected",
      "telegram:default": "connected",
      "telegram:work": "reconnecting",
      "whatsapp:default": "needs-login",
    });
  });

  it("names the lease and its holder for accounts under a lease (API.md §8.5), on holder and standby", async () => {
    const h = await healthWith(
      [
        { channel: "telegram", accountId: "default", state: "connected" },
        { channel: "discord", accountId: "default", state: "stopped" },
        { channel: "telegram", accountId: "hook", state: "connected" },
      ],
      {
        info: (channel, accountId) =>
          accountId === "hook"
            ? undefined
            : channel === "telegram"
              ? { lease: "held", heldBy: "gw-a:1:ab12" }
              : { lease: "standby", heldBy: "gw-b:2:cd34" },
      },
    );
    expect(h.channels).toMatchObject({
      telegram: {
        status: "connected",
        accounts: {
          default: { status: "connected", lease: "held", heldBy: "gw-a:1:ab12" },
          hook: { status: "connected" },
        },
      },
      discord: { accounts: { default: { status: "stopped", lease: "standby", heldBy: "gw-b:2:cd34" } } },
    });
  });

  it("has empty channel maps when no channel runs", async () => {
    const h = await healthWith([]);
    expect(h.channels).toEqual({});
    expect(h.accounts).toEqual({});
  });
});
