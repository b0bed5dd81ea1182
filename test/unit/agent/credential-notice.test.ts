import { describe, expect, it } from "vitest";
import { credentialNotice } from "../../../src/agent/credential-notice.js";
import { parseConfig } from "../../../src/config/index.js";
import { silentLogger } from "../../../src/log.js";
import type { DeliveryRequest } from "../../../src/services/index.js";

/** auth/billing failures tell the owners once per model per hour which key to check (API.md §8.4). */
describe("credentialNotice", () => {
  it("posts to every owner once per model, class and hour, naming the provider's key", async () => {
    const config = parseConfig({
      models: { providers: { oa: { kind: "openai", baseUrl: "http://127.0.0.1:9/v1" } } },
      channels: {
        telegram: {
          accounts: { main: { token: "123:abc" } },
          owners: ["111", "telegram:222", "slack:U1", "*"],
        },
      },
    });
    const sent: DeliveryRequest[] = [];
    let clock = 10 * 3_600_000;
    const services = {
      config,
      logger: silentLogger(),
      now: () => clock,
      delivery: {
        deliver: async (r: DeliveryRequest) => {
          sent.push(r);
          return { status: "sent" as const, channel: "telegram", messageIds: ["1"] };
        },
      } as never,
    };
    credentialNotice(services, "agent:main:x", "oa/gpt-test-cn", "auth");
    credentialNotice(services, "agent:main:y", "oa/gpt-test-cn", "auth"); // same hour: nothing more
    await new Promise((r) => setTimeout(r, 10));
    expect(sent.map((r) => r.route)).toEqual([
      { channel: "telegram", to: "111", accountId: "main" },
      { channel: "telegram", to: "222", accountId: "main" },
    ]);
    expect(sent[0]?.text).toMatch(/oa\/gpt-test-cn.*models\.providers\.oa\.apiKey/);
    expect(sent[0]?.bypassPolicy).toBe(true);
    credentialNotice(services, "agent:main:x", "oa/gpt-test-cn", "billing"); // another class
    clock += 3_600_000;
    credentialNotice(services, "agent:main:x", "oa/gpt-test-cn", "auth"); // the next hour
    await new Promise((r) => setTimeout(r, 10));
    expect(sent).toHaveLength(6);
    // the hour is in the idempotency key: another process posting the same notice is a duplicate
    expect(new Set(sent.map((r) => r.idempotencyKey)).size).toBe(6);
  });
});
