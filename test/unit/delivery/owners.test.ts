import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/index.js";
import { ownerRecipients, peopleRecipients } from "../../../src/delivery/owners.js";

/**
 * Who a private notice goes to (a budget reached, a model key refused, an approval request its
 * chat may not get): the owners on the channels that name them, or `<channel>:<id>` people.
 */

const config = parseConfig({
  channels: {
    telegram: { accounts: { main: { token: "1:x" } }, owners: ["42", "slack:U1", "*"] },
    slack: { accounts: { work: { botToken: "xoxb-1", appToken: "xapp-1" } }, owners: ["slack:U9"] },
  },
});

describe("notice recipients", () => {
  it("owners: each on its channel's first account; another channel's entry and * are no one here", () => {
    expect(ownerRecipients(config)).toEqual([
      { channel: "telegram", to: "42", accountId: "main" },
      { channel: "slack", to: "U9", accountId: "work" },
    ]);
  });

  it("people: <channel>:<id> on a configured channel; bare ids and unknown channels are skipped", () => {
    expect(peopleRecipients(config, ["telegram:111", " slack:U5 ", "222", "discord:9", "bad:"])).toEqual([
      { channel: "telegram", to: "111", accountId: "main" },
      { channel: "slack", to: "U5", accountId: "work" },
    ]);
  });
});
