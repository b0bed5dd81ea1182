import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createDiscordChannel } from "../../channels/discord/index.js";
import { createSlackChannel } from "../../channels/slack/index.js";
import { createTelegramChannel } from "../../channels/telegram/index.js";
import type { ChannelAdapter } from "../../src/channels/types.js";
import type { Config } from "../../src/config/schema.js";
import { AdapterRegistry, ChannelDelivery } from "../../src/delivery/index.js";
import { silentLogger } from "../../src/log.js";
import { createFsStore } from "../../src/store/fs/index.js";
import type { StoreDriver } from "../../src/store/types.js";
import { DISCORD_CONTENT_LIMIT, FakeDiscord } from "../fakes/discord.js";
import { FakeSlack, SLACK_TEXT_LIMIT } from "../fakes/slack.js";
import { FakeTelegram, parseTelegramHtml, TELEGRAM_TEXT_LIMIT } from "../fakes/telegram.js";
import { tempDir } from "../helpers.js";

/**
 * The loopback fakes refuse what the platforms refuse (Telegram: > 4,096 characters, HTML that
 * does not parse; Slack: msg_too_long; Discord: > 2,000 characters), and a long model reply sent
 * through delivery (render + chunk) passes every one of them: chunking proven by a platform
 * that would say no, not by our own arithmetic.
 */

const words = (n: number, tag: string) => Array.from({ length: n }, (_v, i) => `${tag}${i}`).join(" ");

/** A long Markdown reply: paragraphs, a very long paragraph with emphasis and links, escapes, a code fence. */
const LONG_REPLY = [
  `# Report\n\n${words(300, "intro")}`,
  `A **bold start** and _some italics_ with a [link](https://example.com/a?b=1&c=2) & a < b > c. ${words(900, "long")} **bold end** ${words(400, "tail")}`,
  `\`\`\`ts\n${Array.from({ length: 400 }, (_v, i) => `const v${i} = a < b && c > d; // ${i}`).join("\n")}\n\`\`\``,
  words(600, "outro"),
].join("\n\n");

const SESSION = "agent:main:direct:ada";

async function deliverThrough(adapter: ChannelAdapter, to: string, store: StoreDriver) {
  const channels = new AdapterRegistry();
  channels.add(adapter);
  await store.sessions.put({
    key: SESSION,
    sessionId: "s1",
    agentId: "main",
    createdAt: 1,
    updatedAt: 1,
    deliveryContext: { channel: adapter.channel, to, accountId: adapter.accountId },
  });
  const delivery = new ChannelDelivery({ store, config: {} as Config, channels, logger: silentLogger() });
  return delivery.deliver({
    sessionKey: SESSION,
    text: LONG_REPLY,
    idempotencyKey: "reply-1",
    bypassPolicy: true,
  });
}

describe("platform limits", () => {
  let store: StoreDriver;
  let tmp: { dir: string; cleanup: () => void };
  beforeEach(async () => {
    tmp = tempDir();
    store = await createFsStore({ stateDir: tmp.dir, logger: silentLogger() });
  });
  afterEach(async () => {
    await store.close();
    tmp.cleanup();
  });

  describe("telegram", () => {
    let fake: FakeTelegram;
    beforeEach(async () => {
      fake = await FakeTelegram.start();
    });
    afterEach(async () => {
      await fake.close();
    });

    const call = async (payload: Record<string, unknown>) => {
      const res = await fetch(`${fake.apiRoot}/bot${fake.token}/sendMessage`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ chat_id: 42, ...payload }),
      });
      return { status: res.status, body: (await res.json()) as { ok: boolean; description?: string } };
    };

    it.each<[string, Record<string, unknown>, string | null]>([
      ["4,096 characters", { text: "x".repeat(TELEGRAM_TEXT_LIMIT) }, null],
      ["4,097 characters", { text: "x".repeat(TELEGRAM_TEXT_LIMIT + 1) }, "message is too long"],
      ["4,096 visible in longer HTML", { text: `<b>${"x".repeat(4096)}</b>`, parse_mode: "HTML" }, null],
      ["an unclosed tag", { text: "<b>bold", parse_mode: "HTML" }, "can't parse entities"],
      ["a stray end tag", { text: "a</b>", parse_mode: "HTML" }, "can't parse entities"],
      ["a bare <", { text: "a < b", parse_mode: "HTML" }, "can't parse entities"],
      ["a bare &", { text: "a & b", parse_mode: "HTML" }, "can't parse entities"],
      ["an unknown tag", { text: "<div>x</div>", parse_mode: "HTML" }, "can't parse entities"],
      ["escaped text", { text: "a &lt; b &amp;&amp; c &gt; d", parse_mode: "HTML" }, null],
      ["a bare < without HTML mode", { text: "a < b & c" }, null],
      ["empty text", { text: " " }, "message text is empty"],
    ])("the fake answers %s like the Bot API", async (_row, payload, refusal) => {
      const r = await call(payload);
      if (refusal === null) expect(r.body.ok).toBe(true);
      else {
        expect(r.status).toBe(400);
        expect(r.body.description).toContain(refusal);
      }
    });

    it("a long Markdown reply goes out as HTML messages Telegram accepts on the first try", async () => {
      const adapter = createTelegramChannel(
        {
          accountId: "default",
          token: fake.token,
          apiRoot: fake.apiRoot,
          mode: "webhook",
          webhookSecret: "s",
        },
        { logger: silentLogger() },
      );
      const out = await deliverThrough(adapter, "42", store);
      expect(out.status).toBe("sent");
      const sends = fake.calls.filter((c) => c.method === "sendMessage");
      expect(sends.length).toBeGreaterThan(3);
      // Every chunk was accepted as HTML: no refusal, so no fallback to plain text.
      expect(sends.filter((c) => c.ok !== true)).toEqual([]);
      for (const c of sends) expect(c.payload.parse_mode).toBe("HTML");
      const visible = sends.map((c) => parseTelegramHtml(String(c.payload.text)) as string).join("\n");
      for (const w of ["intro0", "long899", "bold end", "tail399", "const v399", "outro599"])
        expect(visible).toContain(w);
    });
  });

  describe("slack", () => {
    let fake: FakeSlack;
    beforeEach(async () => {
      fake = await FakeSlack.start();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("the fake refuses a text past Slack's limit with msg_too_long", async () => {
      const post = (text: string) =>
        fetch(`${fake.apiUrl}chat.postMessage`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${fake.botToken}` },
          body: JSON.stringify({ channel: "C1", text }),
        }).then((r) => r.json() as Promise<{ ok: boolean; error?: string }>);
      expect((await post("x".repeat(SLACK_TEXT_LIMIT))).ok).toBe(true);
      expect(await post("x".repeat(SLACK_TEXT_LIMIT + 1))).toMatchObject({
        ok: false,
        error: "msg_too_long",
      });
    });

    it("a long Markdown reply goes out in messages Slack accepts", async () => {
      const adapter = createSlackChannel(
        {
          accountId: "default",
          botToken: fake.botToken,
          apiUrl: fake.apiUrl,
          mode: "http",
          signingSecret: "s",
        },
        { logger: silentLogger() },
      );
      const out = await deliverThrough(adapter, "C1", store);
      expect(out.status).toBe("sent");
      const posts = fake.calls.filter((c) => c.method === "chat.postMessage");
      expect(posts.length).toBeGreaterThan(3);
      expect(posts.filter((c) => !c.ok)).toEqual([]);
    });
  });

  describe("discord", () => {
    let fake: FakeDiscord;
    beforeEach(async () => {
      fake = await FakeDiscord.start();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("the fake refuses content over 2,000 characters (Invalid Form Body)", async () => {
      const post = (content: string) =>
        fetch(`${fake.apiUrl}/v10/channels/${fake.textChannelId}/messages`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bot ${fake.token}` },
          body: JSON.stringify({ content }),
        });
      expect((await post("x".repeat(DISCORD_CONTENT_LIMIT))).status).toBe(200);
      const refused = await post("x".repeat(DISCORD_CONTENT_LIMIT + 1));
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ code: 50_035, message: "Invalid Form Body" });
    });

    it("a long Markdown reply goes out in messages Discord accepts", async () => {
      const adapter = createDiscordChannel(
        { accountId: "default", token: fake.token, apiUrl: fake.apiUrl },
        { logger: silentLogger() },
      );
      await adapter.start(async () => undefined);
      try {
        const out = await deliverThrough(adapter, fake.textChannelId, store);
        expect(out.status).toBe("sent");
        expect(fake.sent.length).toBeGreaterThan(6);
        for (const m of fake.sent)
          expect(String(m.body.content).length).toBeLessThanOrEqual(DISCORD_CONTENT_LIMIT);
      } finally {
        await adapter.stop();
      }
    });
  });
});
