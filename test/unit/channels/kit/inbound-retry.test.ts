import { describe, expect, it } from "vitest";
import { deliverWithRetry, InboundQueue } from "../../../../src/channels/kit/inbound-retry.js";
import { type InboundMessage, inboundMessageSchema } from "../../../../src/channels/types.js";
import { SwitchboardError } from "../../../../src/errors.js";
import { silentLogger } from "../../../../src/log.js";

const msg = (text: string): InboundMessage =>
  inboundMessageSchema.parse({
    channel: "x",
    accountId: "a",
    chatType: "direct",
    peerId: "p",
    senderId: "p",
    messageId: text,
    text,
  });

describe("inbound retry", () => {
  it("drops a message after the configured retries for ordinary failures", async () => {
    let calls = 0;
    await deliverWithRetry(
      async () => {
        calls++;
        throw new Error("bug");
      },
      msg("a"),
      [0, 0],
      silentLogger(),
    );
    expect(calls).toBe(3);
  });

  it("keeps retrying while the gateway is UNAVAILABLE, beyond the configured retries, until accepted", async () => {
    let calls = 0;
    await deliverWithRetry(
      async () => {
        calls++;
        if (calls < 6) throw new SwitchboardError("UNAVAILABLE", "redis down");
      },
      msg("b"),
      [0, 0],
      silentLogger(),
    );
    expect(calls).toBe(6);
  });

  it("an abort ends the retries", async () => {
    const ac = new AbortController();
    let calls = 0;
    const p = deliverWithRetry(
      async () => {
        calls++;
        if (calls === 2) ac.abort();
        throw new SwitchboardError("UNAVAILABLE", "down");
      },
      msg("c"),
      [1, 1, 1, 1],
      silentLogger(),
      ac.signal,
    );
    await p;
    expect(calls).toBe(2);
  });

  it("the queue keeps per-chat order", async () => {
    const q = new InboundQueue([0], silentLogger());
    const seen: string[] = [];
    await Promise.all(
      ["1", "2", "3"].map((t) =>
        q.push("chat", msg(t), async (m) => {
          await new Promise((r) => setTimeout(r, 5 - Number(m.text)));
          seen.push(m.text);
        }),
      ),
    );
    expect(seen).toEqual(["1", "2", "3"]);
  });
});
