/**
 * The channel adapter contract (STYLE habit 5): every adapter runs this same suite against
 * its platform fake. Platform-neutral on purpose; anything platform-specific belongs in
 * `test/channels/<name>.test.ts`.
 *
 * Harness rules for implementers:
 * - `make()` returns a fresh, NOT yet started adapter wired to a fresh fake.
 * - `inject*` deliver one platform event; successive injections reach the adapter in order
 *   (wait for the platform's acknowledgement where there is one).
 * - `sent()` lists what the fake received from the bot, oldest first.
 * - `rateLimitNextSend(s)` makes the platform's next send answer "rate limited, retry after s seconds".
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ChannelAdapter, type InboundMessage, inboundMessageSchema } from "../../src/channels/types.js";
import { RateLimitedError, type SwitchboardError } from "../../src/errors.js";
import { eventually } from "../helpers.js";

export interface ChannelHarness {
  adapter: ChannelAdapter;
  injectDirect(text: string): Promise<void>;
  injectGroup(text: string, opts: { mention: boolean }): Promise<void>;
  injectOwn(text: string): Promise<void>;
  sent(): Promise<Array<{ to: string; text: string; threadId?: string }>>;
  rateLimitNextSend(retryAfterSeconds: number): Promise<void>;
  cleanup(): Promise<void>;
}

export function channelContract(name: string, make: () => Promise<ChannelHarness>): void {
  describe(`channel contract: ${name}`, () => {
    let h: ChannelHarness;
    let inbound: InboundMessage[];
    const collect = async (m: InboundMessage): Promise<void> => {
      inbound.push(m);
    };
    const waitText = (needle: string): Promise<InboundMessage> =>
      eventually(() => inbound.find((m) => m.text.includes(needle)), 500);

    beforeEach(async () => {
      inbound = [];
      h = await make();
    });

    afterEach(async () => {
      await h.adapter.stop();
      await h.cleanup();
    });

    it("start and stop are idempotent, and a stopped adapter can start again", async () => {
      const second: InboundMessage[] = [];
      await h.adapter.start(collect);
      await h.adapter.start(async (m) => {
        second.push(m);
      });
      expect(h.adapter.status().state).toBe("connected");
      await h.injectDirect("first start");
      await waitText("first start");
      expect(inbound).toHaveLength(1);
      expect(second).toHaveLength(0);

      await h.adapter.stop();
      await h.adapter.stop();
      expect(h.adapter.status().state).toBe("stopped");

      await h.adapter.start(collect);
      expect(h.adapter.status().state).toBe("connected");
      await h.injectDirect("after restart");
      await waitText("after restart");
      expect(inbound.filter((m) => m.text.includes("first start"))).toHaveLength(1);
    });

    it("a direct message becomes a schema-valid InboundMessage", async () => {
      await h.adapter.start(collect);
      await h.injectDirect("hello from a DM");
      const msg = await waitText("hello from a DM");
      expect(inboundMessageSchema.parse(msg)).toEqual(msg);
      expect(msg.channel).toBe(h.adapter.channel);
      expect(msg.accountId).toBe(h.adapter.accountId);
      expect(msg.chatType).toBe("direct");
      expect(msg.senderId).not.toBe("");
      expect(msg.messageId).not.toBe("");
      expect(msg.wasMentioned).toBe(false);
    });

    it("group messages carry the mention flag", async () => {
      await h.adapter.start(collect);
      await h.injectGroup("group with mention", { mention: true });
      await h.injectGroup("group without mention", { mention: false });
      const withMention = await waitText("group with mention");
      const without = await waitText("group without mention");
      for (const m of [withMention, without]) {
        expect(inboundMessageSchema.parse(m)).toEqual(m);
        expect(m.chatType).not.toBe("direct");
      }
      expect(withMention.wasMentioned).toBe(true);
      expect(without.wasMentioned).toBe(false);
      expect(withMention.peerId).toBe(without.peerId);
    });

    it("ignores the bot's own messages", async () => {
      await h.adapter.start(collect);
      await h.injectOwn("echo of my own reply");
      await h.injectDirect("marker after own message");
      await waitText("marker after own message");
      expect(inbound.some((m) => m.text.includes("echo of my own reply"))).toBe(false);
      expect(inbound).toHaveLength(1);
    });

    it("send delivers to the chat an inbound message came from and returns the platform ids", async () => {
      await h.adapter.start(collect);
      await h.injectDirect("reply to me");
      const from = await waitText("reply to me");
      const before = (await h.sent()).length;
      const res = await h.adapter.send({
        accountId: h.adapter.accountId,
        to: from.peerId,
        text: "the reply",
        format: "plain",
      });
      expect(res.messageIds).toHaveLength(1);
      expect(res.messageIds[0]).toMatch(/\S/);
      const sent = (await h.sent()).slice(before);
      expect(sent).toEqual([expect.objectContaining({ to: from.peerId, text: "the reply" })]);
    });

    it("never truncates: text at the limit goes out whole, longer text is split under the limit", async () => {
      await h.adapter.start(collect);
      await h.injectDirect("limit test");
      const { peerId } = await waitText("limit test");
      const limit = h.adapter.capabilities.textLimit;
      const base = { accountId: h.adapter.accountId, to: peerId, format: "plain" as const };

      let before = (await h.sent()).length;
      const exact = "x".repeat(limit);
      expect((await h.adapter.send({ ...base, text: exact })).messageIds).toHaveLength(1);
      expect((await h.sent()).slice(before).map((s) => s.text)).toEqual([exact]);

      before = (await h.sent()).length;
      const words = Array.from(
        { length: Math.ceil((limit * 2.5) / 8) },
        (_, i) => `w${String(i).padStart(5, "0")}`,
      );
      const long = words.join(" ");
      const res = await h.adapter.send({ ...base, text: long });
      const sent = (await h.sent()).slice(before);
      expect(res.messageIds.length).toBe(sent.length);
      expect(sent.length).toBeGreaterThanOrEqual(3);
      for (const s of sent) expect(s.text.length).toBeLessThanOrEqual(limit);
      expect(
        sent
          .map((s) => s.text)
          .join(" ")
          .split(/\s+/),
      ).toEqual(words);
    });

    it("a platform rate limit surfaces as RateLimitedError with retryAfterMs", async () => {
      await h.adapter.start(collect);
      await h.injectDirect("rate limit test");
      const { peerId } = await waitText("rate limit test");
      await h.rateLimitNextSend(3);
      const err = await h.adapter
        .send({ accountId: h.adapter.accountId, to: peerId, text: "too fast", format: "plain" })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(RateLimitedError);
      expect((err as SwitchboardError).code).toBe("RATE_LIMITED");
      expect((err as RateLimitedError).retryAfterMs).toBe(3000);
      // The next send goes through: the fault was the platform's, not a broken adapter.
      const ok = await h.adapter.send({
        accountId: h.adapter.accountId,
        to: peerId,
        text: "later",
        format: "plain",
      });
      expect(ok.messageIds).toHaveLength(1);
    });
  });
}
