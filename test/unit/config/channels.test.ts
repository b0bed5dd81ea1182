import { describe, expect, it } from "vitest";
import { channelSettings } from "../../../src/config/channels.js";
import { parseConfig } from "../../../src/config/load.js";

describe("channelSettings", () => {
  const config = parseConfig({
    channels: {
      telegram: { accounts: { default: { token: "t" } }, streaming: "off", typing: false },
      discord: { accounts: { default: { token: "d" } }, threadBindings: { idleHours: 2 } },
    },
  });

  it("reads a configured channel's section with its defaults", () => {
    expect(channelSettings(config, "telegram")).toMatchObject({
      streaming: "off",
      typing: false,
      dmPolicy: "pairing",
    });
    expect(channelSettings(config, "discord")?.threadBindings).toEqual({ idleHours: 2 });
    expect(channelSettings(config, "webchat")).toMatchObject({ enabled: true, streaming: "partial" });
  });

  it("is undefined for a channel that is not configured, whatever its name", () => {
    expect(channelSettings(config, "slack")).toBeUndefined();
    expect(channelSettings(config, "irc")).toBeUndefined();
    expect(channelSettings(config, "toString")).toBeUndefined();
    expect(channelSettings(config, "__proto__")).toBeUndefined();
  });
});
