import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createDiscordChannel } from "../../channels/discord/index.js";
import { createSlackChannel } from "../../channels/slack/index.js";
import { createTelegramChannel } from "../../channels/telegram/index.js";
import type { ChannelAdapter } from "../../src/channels/types.js";
import { parseConfig } from "../../src/config/load.js";
import { AdapterRegistry, ChannelDelivery } from "../../src/delivery/index.js";
import { silentLogger } from "../../src/log.js";
import type { ReplyStream } from "../../src/services/index.js";
import { createFsStore, type FsStore } from "../../src/store/fs/index.js";
import { FakeDiscord } from "../fakes/discord.js";
import { FakeSlack } from "../fakes/slack.js";
import { FakeTelegram } from "../fakes/telegram.js";
import { tempDir } from "../helpers.js";

/**
 * Streaming edits through the real SDKs against the loopback fakes: one preview posted, edited
 * in place no faster than the interval, the last edit's text equals the final reply, and a
 * re-run of the same turn edits the message it already posted instead of posting again.
 */

const INTERVAL = 60;
const FINAL = "Streaming replies arrive in pieces, edited in place, and end exactly like this.";
const PIECES = FINAL.match(/\S+\s*/g) ?? [];

interface Platform {
  adapter: ChannelAdapter;
  to: string;
  /** Messages posted to the chat. */
  posts(): number;
  /** Edits, in order, with arrival times. */
  edits(): Array<{ text: string; at: number }>;
  /** The text the chat shows now for a message id. */
  textOf(id: string): string | undefined;
  close(): Promise<void>;
}

const platforms: Record<string, () => Promise<Platform>> = {
  telegram: async () => {
    const fake = await FakeTelegram.start();
    const adapter = createTelegramChannel(
      { accountId: "default", token: fake.token, apiRoot: fake.apiRoot },
      { logger: silentLogger() },
    );
    return {
      adapter,
      to: "4242",
      posts: () => fake.sentMessages().length,
      edits: () =>
        fake.calls
          .filter((c) => c.method === "editMessageText" && c.ok)
          .map((c) => ({ text: String(c.payload.text), at: c.at ?? 0 })),
      textOf: (id) => fake.textOf("4242", id),
      close: () => fake.close(),
    };
  },
  discord: async () => {
    const fake = await FakeDiscord.start();
    const adapter = createDiscordChannel(
      { accountId: "default", token: fake.token, apiUrl: fake.apiUrl },
      { logger: silentLogger() },
    );
    return {
      adapter,
      to: fake.textChannelId,
      posts: () => fake.sent.length,
      edits: () => fake.edits.map((e) => ({ text: e.content, at: e.at })),
      textOf: (id) => fake.sent.find((s) => s.id === id)?.body.content as string | undefined,
      close: () => fake.close(),
    };
  },
  slack: async () => {
    const fake = await FakeSlack.start();
    const adapter = createSlackChannel(
      {
        accountId: "default",
        botToken: fake.botToken,
        apiUrl: fake.apiUrl,
        mode: "socket",
        appToken: fake.appToken,
      },
      { logger: silentLogger() },
    );
    return {
      adapter,
      to: "C0GEN",
      posts: () => fake.calls.filter((c) => c.method === "chat.postMessage").length,
      edits: () => fake.updates.map((u) => ({ text: u.text, at: u.at })),
      textOf: (id) => fake.texts.get(`C0GEN:${id}`),
      close: () => fake.close(),
    };
  },
};

for (const [name, start] of Object.entries(platforms)) {
  describe(`${name}: streaming edits`, () => {
    let p: Platform;
    let store: FsStore;
    let cleanup: () => void;
    let delivery: ChannelDelivery;

    beforeEach(async () => {
      p = await start();
      const t = tempDir();
      cleanup = t.cleanup;
      store = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
      const channels = new AdapterRegistry();
      channels.add(p.adapter);
      delivery = new ChannelDelivery(
        { store, config: parseConfig({}), channels, logger: silentLogger() },
        undefined,
        undefined,
        INTERVAL,
      );
      await store.sessions.put({
        key: "agent:main:main",
        sessionId: "s1",
        agentId: "main",
        createdAt: 1,
        updatedAt: 1,
        chatType: "direct",
        deliveryContext: { channel: name, to: p.to, accountId: "default" },
      });
    });
    afterEach(async () => {
      await store.close();
      await p.close();
      cleanup();
    });

    /** Streams the pieces with pauses longer than the interval, so several edits happen. */
    async function streamTurn(stream: ReplyStream): Promise<void> {
      for (const [i, piece] of PIECES.entries()) {
        stream.push(piece);
        if (i % 3 === 2) await new Promise((r) => setTimeout(r, INTERVAL + 20));
      }
    }

    it("posts one preview, edits it at the bounded rate, and ends with exactly the final text", async () => {
      const stream = await delivery.openStream({
        sessionKey: "agent:main:main",
        idempotencyKey: "reply:run-1",
      });
      expect(stream).not.toBeNull();
      if (!stream) return;
      await streamTurn(stream);
      const res = await stream.finish(FINAL);
      expect(res.status).toBe("sent");
      const id = res.status === "sent" ? res.messageIds[0] : undefined;
      expect(p.posts()).toBe(1);
      const edits = p.edits();
      expect(edits.length).toBeGreaterThanOrEqual(2);
      expect(edits.at(-1)?.text).toBe(FINAL);
      expect(p.textOf(String(id))).toBe(FINAL);
      // Bounded rate: no two writes closer than the interval (a small allowance for timer slack).
      for (let i = 1; i < edits.length; i++)
        expect((edits[i]?.at ?? 0) - (edits[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(INTERVAL - 15);
      // Previews only ever grow towards the final text.
      for (const e of edits) expect(FINAL.startsWith(e.text.replace(/ …$/, "").trim())).toBe(true);
    });

    it("a retried turn edits the message it already posted; nothing is posted twice", async () => {
      const first = await delivery.openStream({
        sessionKey: "agent:main:main",
        idempotencyKey: "reply:run-2",
      });
      if (!first) throw new Error("no stream");
      await streamTurn(first);
      await first.close(); // the attempt dies mid-turn
      expect(p.posts()).toBe(1);

      const again = await delivery.openStream({
        sessionKey: "agent:main:main",
        idempotencyKey: "reply:run-2",
      });
      if (!again) throw new Error("no stream");
      await streamTurn(again);
      const res = await again.finish(FINAL);
      expect(res.status).toBe("sent");
      expect(p.posts()).toBe(1);
      expect(p.edits().at(-1)?.text).toBe(FINAL);

      // And a third attempt that streams nothing still leaves one message with the final text.
      const third = await delivery.openStream({
        sessionKey: "agent:main:main",
        idempotencyKey: "reply:run-2",
      });
      const res3 = await third?.finish(FINAL);
      expect(res3?.status).toBe("sent");
      expect(p.posts()).toBe(1);
    });

    it("a quick reply (finished within the first interval) is posted once and never edited", async () => {
      const stream = await delivery.openStream({
        sessionKey: "agent:main:main",
        idempotencyKey: "reply:run-3",
      });
      if (!stream) throw new Error("no stream");
      for (const piece of PIECES) stream.push(piece);
      await stream.finish(FINAL);
      expect(p.posts()).toBe(1);
      expect(p.edits()).toHaveLength(0);
    });
  });
}

describe("streaming config", () => {
  it("defaults: partial for telegram, slack, discord and the web chat, final for whatsapp", () => {
    const c = parseConfig({
      channels: {
        telegram: { accounts: { default: { token: "t" } } },
        slack: { accounts: { default: { botToken: "b" } } },
        discord: { accounts: { default: { token: "d" } } },
        whatsapp: { accounts: { default: {} } },
      },
    });
    expect(c.channels.telegram?.streaming).toBe("partial");
    expect(c.channels.slack?.streaming).toBe("partial");
    expect(c.channels.discord?.streaming).toBe("partial");
    expect(c.channels.whatsapp?.streaming).toBe("final");
    expect(c.channels.webchat.streaming).toBe("partial");
    expect(c.channels.telegram?.typing).toBe(true);
  });

  it("streaming: final opens no preview", async () => {
    const fake = await FakeTelegram.start();
    const t = tempDir();
    const store = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
    try {
      const channels = new AdapterRegistry();
      channels.add(
        createTelegramChannel(
          { accountId: "default", token: fake.token, apiRoot: fake.apiRoot },
          { logger: silentLogger() },
        ),
      );
      const config = parseConfig({
        channels: { telegram: { accounts: { default: { token: fake.token } }, streaming: "final" } },
      });
      await store.sessions.put({
        key: "agent:main:main",
        sessionId: "s1",
        agentId: "main",
        createdAt: 1,
        updatedAt: 1,
        deliveryContext: { channel: "telegram", to: "4242", accountId: "default" },
      });
      const delivery = new ChannelDelivery({ store, config, channels, logger: silentLogger() });
      expect(await delivery.openStream({ sessionKey: "agent:main:main", idempotencyKey: "k" })).toBeNull();
    } finally {
      await store.close();
      await fake.close();
      t.cleanup();
    }
  });
});
